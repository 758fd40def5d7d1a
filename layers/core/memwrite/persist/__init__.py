"""Stage 6, persist: one atomic commit per candidate."""
