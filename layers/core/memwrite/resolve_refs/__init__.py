"""Stage 3, resolve_refs: tie every candidate's entity to one of the user's entities."""
