"""The read side: search, traces, replay (dry runs) and rollback."""
