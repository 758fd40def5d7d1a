"""Stage 5, conflict: what a keyed candidate supersedes, contradicts, or is superseded by."""
