"""The embedded backend: every store, the queue and the search index in SQLite files."""
