"""Stage 4, dedupe: is this candidate a memory we already hold? Three tiers, cheapest first."""
