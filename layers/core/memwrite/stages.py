"""The ordered list of stages: the single source of truth for the local runner, the Lambda
handlers (`functions/stage_handler.py`) and the state machine the deployment builds.

Each stage is the package `memwrite.<name>`, whose `stage` module holds its entry point and
`build_deps(adapters)`, the builder of what `run` takes. Every stage after the queue is
`run(payload, config, deps) -> payload`, typed by the models named here. A stage's package is
imported on first use of its `run` or `build_deps`, so a Lambda loads only its own stage (the
pre_filter Lambda never pays for the extractors, numpy or rapidfuzz).

Each entry also declares what its Lambda may do, read by the deployment (`infra/`): the tables
it reads and writes, the search index, the model and the embedder it calls, and the metrics
it emits for a malformed model answer (the dashboard draws them). A new stage is its package,
its handler folder and its entry here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from memwrite.models import IngestRequest, IngestResponse
from memwrite.payloads import (
    ExtractInput,
    ExtractOutput,
    IndexedChange,
    ItemsPayload,
    OutboxChange,
)
from memwrite.schema import Access, SearchAccess

if TYPE_CHECKING:
    from memwrite.ports import StageAdapters

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
    # table logical name (`memwrite.schema`) -> what its Lambda may do to it; required, so a
    # stage gets no access by accident
    tables: Mapping[str, Access] = field(kw_only=True, hash=False)
    entry: str = "run"
    search: SearchAccess | None = None  # the search index (its Lambda gets OPENSEARCH_*)
    calls_model: bool = False  # may call an LLM: emits `llm.*` metrics, gets cost widgets
    # Raises `BudgetWait` when the model budget is empty: the pipeline waits its delay
    waits_for_budget: bool = False
    calls_embedder: bool = False  # calls the deployed embedder (Bedrock Titan when chosen)
    malformed_metrics: tuple[str, ...] = ()  # events counting unusable model answers

    @property
    def function_dir(self) -> str:
        """The stage's Lambda folder, `functions/<name>/`: one name for the package and its
        Lambda."""
        return self.name

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

    @property
    def build_deps(self) -> Callable[[StageAdapters], Any]:
        """The builder of the deps its entry point takes, from the deployment's adapters."""
        builder: Callable[[StageAdapters], Any] = importlib.import_module(self.module).build_deps
        return builder


R, W, RW = Access.READ, Access.WRITE, Access.READ_WRITE
# The memory store's reads (dedupe, conflict): memories, their fact rows, the outbox's pending
# index and the ledger; persist writes all four in one transaction, which also checks the
# source trace (a ConditionCheck on the turns table: part of the read grant).
_STORE_READ = {"memories": R, "entity_facts": R, "outbox": R, "turns": R}

STAGES: tuple[StageDef, ...] = (
    StageDef(
        "pre_filter",
        StagePlacement.INGEST,
        IngestRequest,
        IngestResponse,
        entry="ingest_turns",
        # ledger, traces, rate claims, the session's question; the tenant's skip patterns,
        # PII allow list and limits (its stored settings)
        tables={"turns": RW, "spans": W, "tenant_settings": R},
    ),
    StageDef(
        "extract",
        StagePlacement.PIPELINE,
        ExtractInput,
        ExtractOutput,
        # The session log (read, and appended with its source trace's ConditionCheck), the
        # episodes kept in the same transaction (turns) with their outbox rows, and the
        # tenant's instructions, topics and verifier (its stored settings)
        tables={"turns": RW, "outbox": W, "spans": W, "tenant_settings": R},
        calls_model=True,  # the extractor and the verifier
        waits_for_budget=True,  # a live batch; the judges of later stages do not wait
        malformed_metrics=("extraction_json_fail",),
    ),
    StageDef(
        "resolve_refs",
        StagePlacement.PIPELINE,
        ExtractOutput,
        ItemsPayload,
        # Entities written with their source traces' ConditionChecks (the turns read grant)
        tables={"entities": RW, "turns": R, "spans": W},
        calls_model=True,  # the judge of ambiguous references
        malformed_metrics=("resolve_json_fail",),
    ),
    StageDef(
        "dedupe",
        StagePlacement.PIPELINE,
        ItemsPayload,
        ItemsPayload,
        tables={**_STORE_READ, "spans": W},
        search=SearchAccess.READ,  # events and tasks already indexed
        calls_model=True,  # the judge of the similarity band
        malformed_metrics=("dedupe_json_fail",),
    ),
    StageDef(
        "conflict",
        StagePlacement.PIPELINE,
        ItemsPayload,
        ItemsPayload,
        tables={**_STORE_READ, "spans": W},
    ),
    StageDef(
        "persist",
        StagePlacement.PIPELINE,
        ItemsPayload,
        ItemsPayload,
        tables={"memories": RW, "entity_facts": RW, "outbox": RW, "turns": RW, "spans": W},
        search=SearchAccess.READ,  # dedupe's look-up, after a lost race
        calls_model=True,  # the dedupe judge again, after a lost race
        malformed_metrics=("dedupe_json_fail",),
    ),
    # `run` takes one outbox row; the handler gives a stream batch to `memwrite.hype.stage.
    # run_batch`, whose rows fail one by one (partial batch failures).
    StageDef(
        "hype",
        StagePlacement.STREAM,
        OutboxChange,
        IndexedChange,
        # Marks outbox rows done; reads episodes (turns) to index them, and the tenants'
        # webhooks (tenant_settings) to hand each row's deliveries to the webhook queue
        tables={"outbox": RW, "memories": R, "turns": R, "spans": W, "tenant_settings": R},
        search=SearchAccess.READ_WRITE,  # indexes memories and episodes, removes erased ones
        calls_model=True,  # HyPE questions
        calls_embedder=True,  # memories and their questions
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
