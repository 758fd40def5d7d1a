"""`POST /v1/traces/{trace_id}/replay`: a trace's stored inputs through the pipeline again, in
a dry run, with the tenant's current config and with an override, and what the override
changes (`memwrite.replay.diff`).

Both runs call the stages of `memwrite.stages.STAGES` themselves (pre-filter, then every
pipeline stage, in order), each with the deps its own `build_deps` builds from the dry-run
adapters (`memwrite.replay.dry_run`): nothing is written, and the two runs differ only by the
config. The inputs are the firewall-masked turns the trace
kept, so a replay never sees a secret (and a sentence with one is judged by its placeholder).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memwrite.config.renamed_keys import renamed_keys, without_retired_keys
from memwrite.config.settings import PipelineConfig, Settings
from memwrite.errors import InvalidQuery, TraceWithoutInputs
from memwrite.models import IngestRequest, IngestTurn, Source
from memwrite.payloads import ExtractInput, ItemsPayload
from memwrite.ports import StageAdapters, TraceRecord, TurnLedger
from memwrite.records.memory import DIRECT_SOURCE
from memwrite.replay.diff import ReplayDiff, RunOutcome, Write, diff_runs
from memwrite.replay.dry_run import DryRunAdapters
from memwrite.stages import pipeline_stages, stage_named

__all__ = [
    "BatchReplay",
    "BatchReplayRequest",
    "ReplayDeps",
    "ReplayRequest",
    "ReplayTotals",
    "config_with",
    "replay_trace",
    "replay_traces_of_user",
]

# Traces per batch replay request (`next_cursor` continues): with a model, each trace costs two
# extractions, and the API answers within API Gateway's 29 s.
MAX_BATCH_TRACES = 25


class ReplayRequest(BaseModel):
    """Body of `POST /v1/traces/{trace_id}/replay`."""

    model_config = ConfigDict(extra="forbid")

    config: dict[str, Any] = Field(
        default_factory=dict,
        description="Fields of the pipeline config to change, nested as in the config file, "
        'e.g. {"pre_filter": {"min_words": 5}}.',
    )


class BatchReplayRequest(ReplayRequest):
    """Body of `POST /v1/users/{user_id}/replay`: every trace of the user in [from, to]."""

    since: datetime | None = Field(default=None, alias="from")
    until: datetime | None = Field(default=None, alias="to")
    limit: int = Field(default=10, ge=1, le=MAX_BATCH_TRACES)
    cursor: str | None = Field(default=None, max_length=200)


@dataclass
class ReplayDeps:
    """The ledger a replay reads the trace from, and the deployment's adapters bundle: each run
    wraps it in dry-run overlays (`DryRunAdapters`), from which every stage builds its deps."""

    ledger: TurnLedger
    adapters: StageAdapters


def _merged(base: dict[str, Any], override: dict[str, Any], path: str) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if key not in base:
            raise InvalidQuery(f"{path}.{key}", "not a field of the pipeline config")
        if isinstance(base[key], dict) and isinstance(value, dict) and base[key]:
            merged[key] = _merged(base[key], value, f"{path}.{key}")
        else:
            merged[key] = value
    return merged


def config_with(base: PipelineConfig, override: dict[str, Any]) -> PipelineConfig:
    """`base` with the override's fields changed, validated by the config model; an unknown
    field or a bad value raises `InvalidQuery` naming it (`config.pre_filter.min_words`)."""
    try:
        # An old key (`prefilter`) still names its section; a retired one is left out.
        override = without_retired_keys(renamed_keys(override))
    except ValueError as exc:
        raise InvalidQuery("config", str(exc)) from exc
    merged = _merged(base.model_dump(mode="json"), override, "config")
    try:
        return PipelineConfig.model_validate(merged)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(["config", *(str(part) for part in first["loc"])])
        raise InvalidQuery(field, first["msg"]) from exc


def _dry_run(
    record: TraceRecord, request: IngestRequest, config: PipelineConfig, deps: ReplayDeps
) -> RunOutcome:
    """One run of the stages over the trace's inputs, against fresh overlays: each stage's deps
    are built by its own `build_deps` (its module loads on the first replay, not at the api
    Lambda's cold start)."""
    hidden = frozenset(
        memory_id
        for memory_id, outcome in deps.ledger.memories_of_trace(record.tenant, record.trace_id)
        if outcome == "stored"
    )
    dry = DryRunAdapters(deps.adapters, config, hidden)
    created = datetime.fromisoformat(record.created_at)
    pre_filter = stage_named("pre_filter")
    # The pre-filter runs as at the trace: its turns were not in the future then, and an
    # undated turn is observed when the trace was made.
    ingest = replace(pre_filter.build_deps(dry), clock=created.timestamp)
    pre_filter.run(request, tenant=record.tenant, config=config, deps=ingest)
    stage_deps: dict[str, Any] = {stage.name: stage.build_deps(dry) for stage in pipeline_stages()}
    # Persist dates what it writes as at the trace, too.
    stage_deps["persist"] = replace(stage_deps["persist"], clock=lambda: created)
    writes: list[Write] = []
    if dry.queued.turns:
        for batch in ExtractInput.batches_of(list(dry.queued.turns.values())):
            payload: Any = batch
            for stage in pipeline_stages():
                payload = stage.run(payload, config, stage_deps[stage.name])
            assert isinstance(payload, ItemsPayload)
            writes.extend(
                Write(item.memory_id, item.outcome, item.candidate.text)
                for item in payload.items
                if item.memory_id is not None and item.outcome is not None
            )
    return RunOutcome(
        spans=list(dry.collected.by_item.values()),
        writes=writes,
        episodes=list(dry.session.episodes),
    )


def _request_of(record: TraceRecord, deps: ReplayDeps) -> IngestRequest:
    inputs = deps.ledger.trace_inputs(record.tenant, record.trace_id)
    if not inputs or record.source == DIRECT_SOURCE:  # a direct write extracted nothing
        raise TraceWithoutInputs(record.trace_id)
    return IngestRequest(
        session_id=record.session_id,
        user_id=record.user_id,
        agent_id=record.agent_id,
        turns=[
            IngestTurn(role=turn.role, content=turn.content, timestamp=turn.timestamp)
            for turn in inputs
        ],
        source=Source(record.source),
    )


def _replay_record(
    record: TraceRecord, override: dict[str, Any], settings: Settings, deps: ReplayDeps
) -> ReplayDiff:
    current = settings.for_request(record.tenant, record.agent_id)
    changed = config_with(current, override)
    request = _request_of(record, deps)
    before = _dry_run(record, request, current, deps)
    after = _dry_run(record, request, changed, deps)
    return diff_runs(record.trace_id, before, after)


def replay_trace(
    tenant: str, trace_id: str, request: ReplayRequest, settings: Settings, deps: ReplayDeps
) -> ReplayDiff | None:
    """The diff of one trace of `tenant` (None: no such trace for that tenant).

    Raises `InvalidQuery` for a bad override, `TraceWithoutInputs` for a trace recorded
    before traces kept their inputs."""
    record = deps.ledger.get_trace(tenant, trace_id)
    if record is None:
        return None
    return _replay_record(record, request.config, settings, deps)


class ReplayTotals(BaseModel):
    traces: int  # replayed
    changed: int  # traces whose outcome the override changes
    without_inputs: int  # recorded before traces kept their inputs: not replayed
    newly_dropped: int
    newly_kept: int
    added: int
    merged: int
    no_longer_written: int


class BatchReplay(BaseModel):
    user_id: str
    traces: list[ReplayDiff]  # newest first
    without_inputs: list[str]  # trace ids
    totals: ReplayTotals
    next_cursor: str | None


def replay_traces_of_user(
    tenant: str,
    user_id: str,
    request: BatchReplayRequest,
    settings: Settings,
    deps: ReplayDeps,
) -> BatchReplay:
    """One page of the user's traces in [from, to], each replayed on its own against the
    current store (not one after another), with totals over the page."""
    # Checked once, before any trace is read: a bad override fails the same with no traces.
    config_with(settings.for_request(tenant), request.config)
    page = deps.ledger.traces_of_user(
        tenant,
        user_id,
        since=request.since,
        until=request.until,
        limit=request.limit,
        cursor=request.cursor,
    )
    diffs: list[ReplayDiff] = []
    without_inputs: list[str] = []
    for record in page.traces:
        try:
            diffs.append(_replay_record(record, request.config, settings, deps))
        except TraceWithoutInputs:
            without_inputs.append(record.trace_id)
    totals = ReplayTotals(
        traces=len(diffs),
        changed=sum(1 for diff in diffs if diff.changed),
        without_inputs=len(without_inputs),
        newly_dropped=sum(len(s.newly_dropped) for d in diffs for s in d.stages.values()),
        newly_kept=sum(len(s.newly_kept) for d in diffs for s in d.stages.values()),
        added=sum(len(d.memories.added) for d in diffs),
        merged=sum(len(d.memories.merged) for d in diffs),
        no_longer_written=sum(len(d.memories.no_longer_written) for d in diffs),
    )
    return BatchReplay(
        user_id=user_id,
        traces=diffs,
        without_inputs=without_inputs,
        totals=totals,
        next_cursor=page.next_cursor,
    )
