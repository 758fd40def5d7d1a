"""A claim about a user: the candidate, its confidence and tier, the entities it names."""
