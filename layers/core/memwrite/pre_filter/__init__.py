"""Stage 1, pre_filter: the cheapest checks on every turn, inside the HTTPS call."""
