"""The ordered list of stages: the single source of truth for the local runner, the Lambda
handlers (`functions/stage_handler.py`) and the state machine the deployment builds.

Each stage is the package `memwrite.<name>`, whose `stage` module holds its entry point. Every
stage after the queue is `run(payload, config, deps) -> payload`, typed by the models named
here. A stage's package is imported on first use of its `run`, so a Lambda loads only its own
stage (the ingest Lambda never pays for the extractors, numpy or rapidfuzz).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import BaseModel

from memwrite.models import IngestRequest, IngestResponse
from memwrite.payloads import (
    ExtractInput,
    ExtractOutput,
    IndexedChange,
    ItemsPayload,
    OutboxChange,
)

__all__ = [
    "STAGES",
    "StageDef",
    "StagePlacement",
    "pipeline_stages",
    "stage_named",
    "stage_names",
    "stream_stages",
]


class StagePlacement(StrEnum):
    INGEST = "ingest"  # synchronous, inside the HTTPS call (its entry point is the API's)
    PIPELINE = "pipeline"  # after the queue, one Step Functions task per stage
    STREAM = "stream"  # after persist, on the outbox's DynamoDB stream


@dataclass(frozen=True)
class StageDef:
    name: str
    placement: StagePlacement
    input_model: type[BaseModel]
    output_model: type[BaseModel]
    function_dir: str  # functions/<dir>/handler.py
    entry: str = "run"
    calls_model: bool = False  # may call an LLM: emits `llm.*` metrics, gets cost widgets

    @property
    def package(self) -> str:
        """The stage's package: `memwrite.<name>`."""
        return f"memwrite.{self.name}"

    @property
    def module(self) -> str:
        """The module of the stage's entry point."""
        return f"{self.package}.stage"

    @property
    def run(self) -> Callable[..., Any]:
        """The stage's entry point; for pipeline and stream stages `run(payload, config, deps)`
        (a stream stage's payload is one record of the stream)."""
        entry: Callable[..., Any] = getattr(importlib.import_module(self.module), self.entry)
        return entry


STAGES: tuple[StageDef, ...] = (
    StageDef(
        "pre_filter",
        StagePlacement.INGEST,
        IngestRequest,
        IngestResponse,
        "ingest",
        entry="ingest_turns",
    ),
    StageDef(
        "extract",
        StagePlacement.PIPELINE,
        ExtractInput,
        ExtractOutput,
        "extract",
        calls_model=True,  # the extractor and the verifier
    ),
    StageDef(
        "resolve_refs",
        StagePlacement.PIPELINE,
        ExtractOutput,
        ItemsPayload,
        "resolve_refs",
        calls_model=True,  # the judge of ambiguous references
    ),
    StageDef(
        "dedupe",
        StagePlacement.PIPELINE,
        ItemsPayload,
        ItemsPayload,
        "dedupe",
        calls_model=True,  # the judge of the similarity band
    ),
    StageDef("conflict", StagePlacement.PIPELINE, ItemsPayload, ItemsPayload, "conflict"),
    StageDef(
        "persist",
        StagePlacement.PIPELINE,
        ItemsPayload,
        ItemsPayload,
        "persist",
        calls_model=True,  # the dedupe judge again, after a lost race
    ),
    # One outbox row per call: the handler runs it for each stream record (partial failures).
    StageDef(
        "hype",
        StagePlacement.STREAM,
        OutboxChange,
        IndexedChange,
        "hype",
        calls_model=True,  # HyPE questions
    ),
)


def pipeline_stages() -> tuple[StageDef, ...]:
    """The stages after the queue, in order: each one's output is the next one's input."""
    return tuple(stage for stage in STAGES if stage.placement is StagePlacement.PIPELINE)


def stream_stages() -> tuple[StageDef, ...]:
    """The stages on the outbox's change stream, after persist (today: hype)."""
    return tuple(stage for stage in STAGES if stage.placement is StagePlacement.STREAM)


def stage_named(name: str) -> StageDef:
    for stage in STAGES:
        if stage.name == name:
            return stage
    raise KeyError(f"no stage named {name!r}; stages: {', '.join(s.name for s in STAGES)}")


def stage_names() -> tuple[str, ...]:
    return tuple(stage.name for stage in STAGES)
