"""Who is calling: the tenant of a request from its credential, and API keys stored as hashes."""
