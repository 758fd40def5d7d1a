"""Suite-wide settings."""

from __future__ import annotations

import os

from hypothesis import settings

# `make test` (and so CI) replays the same generated examples on every run: a red build is
# reproducible, never a coin toss. `HYPOTHESIS_PROFILE=explore make test` draws new ones;
# what they find becomes an explicit regression case.
settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
