"""The ordered list of stages: the single source of truth for the local runner and, later, the
Step Functions definition. A stage that runs in the ingest Lambda has no queue handler.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["STAGES", "StageDef", "StagePlacement", "stage_names"]


class StagePlacement(StrEnum):
    INGEST = "ingest"  # synchronous, inside the HTTPS call
    PIPELINE = "pipeline"  # after the queue, one Step Functions task per stage


@dataclass(frozen=True)
class StageDef:
    name: str
    placement: StagePlacement
    function_dir: str  # functions/<dir>/handler.py


STAGES: tuple[StageDef, ...] = (
    StageDef("pre_filter", StagePlacement.INGEST, "ingest"),
    StageDef("extract", StagePlacement.PIPELINE, "extract"),
    StageDef("resolve_refs", StagePlacement.PIPELINE, "resolve_refs"),
    StageDef("dedupe", StagePlacement.PIPELINE, "dedupe"),
    StageDef("conflict", StagePlacement.PIPELINE, "conflict"),
    StageDef("persist", StagePlacement.PIPELINE, "persist"),
)


def stage_names() -> tuple[str, ...]:
    return tuple(stage.name for stage in STAGES)
