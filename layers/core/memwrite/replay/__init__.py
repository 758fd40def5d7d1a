"""Replay: a trace's stored inputs through the stages again in a dry run that writes nothing,
with the tenant's current config and with an override, and what the override changes (`run`:
the runs, `dry_run`: the write-nothing adapters, `diff`: the difference)."""

from memwrite.replay.diff import ReplayDiff
from memwrite.replay.run import (
    BatchReplay,
    BatchReplayRequest,
    ReplayDeps,
    ReplayRequest,
    ReplayTotals,
    config_with,
    replay_trace,
    replay_traces_of_user,
)

__all__ = [
    "BatchReplay",
    "BatchReplayRequest",
    "ReplayDeps",
    "ReplayDiff",
    "ReplayRequest",
    "ReplayTotals",
    "config_with",
    "replay_trace",
    "replay_traces_of_user",
]
