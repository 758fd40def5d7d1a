"""Stage 2, extract: the rule fast-path first, one model call for what the rules cannot handle."""
