"""Suite-wide settings."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# `make test` (and so CI) replays the same generated examples on every run: a red build is
# reproducible, never a coin toss. `HYPOTHESIS_PROFILE=explore make test` draws new ones;
# what they find becomes an explicit regression case.
settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`make test` runs on every core (pytest-xdist, `--dist loadgroup`); the CDK tests share
    one synth of every environment (a session fixture, seconds each), so they stay together on
    one worker rather than synthesizing on each."""
    infrastructure = Path(__file__).parent / "infrastructure"
    for item in items:
        if item.path.is_relative_to(infrastructure):
            item.add_marker(pytest.mark.xdist_group("cdk"))
