"""`memwrite eval`: data sets through the local pipeline, scored against what they know.

Each conversation runs once per speaker as the user, on a fresh state (`run_sessions`:
the pipeline `memwrite ingest` and `make demo` run, in API-sized requests): that speaker's
turns are user turns, the other's are assistant turns (so a short answer keeps its question),
at the data set's times. The report per data set sums these runs: the funnel from the traces'
spans, recall of fact-bearing turns through the pre-filter, LLM use, what was stored, and
retrieval recall@k against the same recall of every turn stored raw and searched with BM25.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path

from pydantic import BaseModel
from rapidfuzz import fuzz, utils
from tqdm import tqdm

from memwrite.models import SpanResult
from memwrite.records.memory import MemoryUnit
from memwrite.stages import stage_names
from memwrite_local.evaluation.baseline import RawTurnIndex
from memwrite_local.evaluation.data import ConversationData, DatasetData, FactChange, Question
from memwrite_local.evaluation.recording import (
    EXCHANGES_DIR,
    RunRecording,
    outcome_of,
    prompt_versions,
    write_recording,
)
from memwrite_local.runtime.pipeline import LocalRun, run_sessions

__all__ = [
    "DEFAULT_KS",
    "CriScore",
    "DatasetReport",
    "LlmKeyMissing",
    "RecordingExists",
    "evaluate",
    "question_user",
    "recall_at_k",
    "sessions_as",
]

DEFAULT_KS = (5, 10)
LLM_KEY = "ANTHROPIC_API_KEY"
LLM_RECORD = "MEMWRITE_LLM_RECORD"
PREFILTER_STAGE = "pre_filter"
# A stored value names a ground-truth value when its words are (nearly) a subset of it.
_VALUE_MATCH = 85.0
_UNSAFE_ID = re.compile(r"[^A-Za-z0-9_.-]+")


class LlmKeyMissing(Exception):
    """`--llm` without an API key: the run would silently be the offline extractor."""


class RecordingExists(Exception):
    """`--record` into a directory that already holds one of this run's recordings."""


class CriScore(BaseModel):
    changes: int
    changes_new_active_old_superseded: int
    noise_examples: int
    noise_examples_with_memory: int


class DatasetReport(BaseModel):
    """One data set's line of `memwrite eval --json` (the issue's contract, plus more)."""

    name: str
    format: str
    extractor: str
    conversations: int
    runs: int
    conversation_turns: int
    turns: int
    dropped_by_stage: dict[str, int]
    dropped_by_reason: dict[str, int]
    candidates: int
    candidates_dropped_by_reason: dict[str, int]
    fact_bearing_turns: int
    fact_bearing_recall: float | None
    llm_calls: int
    llm_calls_per_turn: float
    deferred_turns: int
    failed_turns: int
    memories_per_1000_turns: float
    supersessions: int
    items_stored: int  # memories and episodes
    items_by_kind: dict[str, int]  # {"memory": n, "episode": n}
    active_memories: int
    qa_items: int
    recall_at_k: dict[str, float | None]  # over what search returns by default: both kinds
    recall_at_k_memories_only: dict[str, float | None]
    baseline_items_stored: int
    baseline_raw_bm25_recall_at_k: dict[str, float | None]
    input_tokens: int
    output_tokens: int
    tokens_per_1000_turns: float
    cost_usd: float
    cost_usd_per_1000_turns: float
    cri: CriScore | None = None


@dataclass
class _Tally:
    """The sums over one data set's runs."""

    turns: int = 0
    dropped: Counter[tuple[str, str]] = field(default_factory=Counter)
    candidates: int = 0
    candidates_dropped: Counter[str] = field(default_factory=Counter)
    fact_bearing: int = 0
    fact_bearing_kept: int = 0
    llm_calls: int = 0
    deferred: int = 0
    failed: int = 0
    memories: int = 0
    active: int = 0
    supersessions: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    hits: Counter[int] = field(default_factory=Counter)
    memory_hits: Counter[int] = field(default_factory=Counter)
    episodes: int = 0
    baseline_hits: Counter[int] = field(default_factory=Counter)
    questions: int = 0
    baseline_items: int = 0
    changes_applied: int = 0
    noise_with_memory: int = 0


def recall_at_k(ranked_refs: Sequence[str | None], evidence: frozenset[str], k: int) -> bool:
    """A hit: one of the first `k` results comes from an evidence turn."""
    return any(ref in evidence for ref in ranked_refs[:k])


def question_user(question: Question, conversation: ConversationData) -> str:
    """Whose memories answer it: the speaker who said most of its evidence (the first
    evidence turn's speaker on a tie); memories are only ever drawn from the user's turns."""
    speakers = {turn.ref: turn.speaker for turn in conversation.turns}
    said = Counter(speakers[ref] for ref in sorted(question.evidence) if ref in speakers)
    if not said:
        return conversation.users[0]
    first = next(turn.speaker for turn in conversation.turns if turn.ref in question.evidence)
    best = max(said.values())
    return first if said[first] == best else said.most_common(1)[0][0]


def _safe_id(name: str) -> str:
    return _UNSAFE_ID.sub("-", name).strip("-")[:128] or "x"


def sessions_as(conversation: ConversationData, user: str) -> list[dict[str, object]]:
    """The conversation as `user` sends it: one request body per data set session, in order."""
    return [
        {
            "user_id": _safe_id(user),
            "session_id": _safe_id(f"{conversation.name}-{session}"),
            "turns": [
                {
                    "role": "user" if turn.speaker == user else "assistant",
                    "content": turn.text,
                    "timestamp": turn.timestamp.isoformat(),
                }
                for turn in turns
            ],
        }
        for session, turns in groupby(conversation.turns, key=lambda turn: turn.session)
    ]


def _values_match(stored: str, truth: str) -> bool:
    return (
        len(stored) > 2
        and fuzz.token_set_ratio(stored, truth, processor=utils.default_process) >= _VALUE_MATCH
    )


def change_applied(change: FactChange, memories: Sequence[MemoryUnit]) -> bool:
    """The new value is active and the old one superseded, on the same predicate."""
    new_keys = {
        (memory.entity, memory.attribute)
        for memory in memories
        if memory.active and _values_match(memory.value, change.new_value)
    }
    return any(
        memory.superseded_by is not None
        and (memory.entity, memory.attribute) in new_keys
        and _values_match(memory.value, change.old_value)
        for memory in memories
    )


def _score_run(
    tally: _Tally,
    conversation: ConversationData,
    user: str,
    run: LocalRun,
    *,
    questions: Sequence[Question],
    ks: Sequence[int],
) -> None:
    turn_ids: list[str] = run.trace["turn_ids"]
    if len(turn_ids) != len(conversation.turns):
        raise RuntimeError(f"{conversation.name}: the trace lists {len(turn_ids)} turns")
    ref_of = {tid: turn.ref for tid, turn in zip(turn_ids, conversation.turns, strict=True)}
    funnel = run.funnel
    tally.turns += funnel.turns_in
    for stage, reasons in funnel.dropped.items():
        tally.dropped.update({(stage, label): count for label, count in reasons.items()})
    tally.candidates += funnel.candidates
    tally.candidates_dropped.update(funnel.candidates_dropped)
    tally.deferred += funnel.deferred
    tally.failed += len(run.failed)
    tally.llm_calls += run.trace["llm_calls"]
    tally.cost_usd += run.trace["cost_usd"]
    for span in run.spans:
        if span.llm is not None:
            tally.input_tokens += span.llm.input_tokens
            tally.output_tokens += span.llm.output_tokens
    screened_out = {
        ref_of.get(span.item_id)
        for span in run.spans
        if span.stage == PREFILTER_STAGE and span.kind == "turn"
        if span.result is SpanResult.REJECT
    }
    own_facts = {
        turn.ref
        for turn in conversation.turns
        if turn.speaker == user and turn.ref in conversation.fact_bearing
    }
    tally.fact_bearing += len(own_facts)
    tally.fact_bearing_kept += len(own_facts - screened_out)
    tally.memories += len(run.memories)
    tally.active += sum(memory.active for memory in run.memories)
    tally.supersessions += sum(memory.superseded_by is not None for memory in run.memories)
    tally.episodes += len(run.episodes)
    for question, (_, results) in zip(questions, run.searches, strict=True):
        ranked = [ref_of.get(result["source_turn_id"]) for result in results]
        tally.hits.update(k for k in ks if recall_at_k(ranked, question.evidence, k))
    for question, (_, results) in zip(questions, run.memory_searches, strict=True):
        ranked = [ref_of.get(result["source_turn_id"]) for result in results]
        tally.memory_hits.update(k for k in ks if recall_at_k(ranked, question.evidence, k))
    tally.changes_applied += sum(change_applied(c, run.memories) for c in conversation.changes)
    sources = {ref_of.get(memory.turn_id) for memory in run.memories}
    tally.noise_with_memory += sum(bool(refs & sources) for refs in conversation.noise_refs)


def _score_baseline(
    tally: _Tally,
    conversation: ConversationData,
    user: str,
    *,
    questions: Sequence[Question],
    ks: Sequence[int],
) -> None:
    raw = RawTurnIndex(_safe_id(user), ((turn.ref, turn.text) for turn in conversation.turns))
    try:
        tally.baseline_items += len(raw)
        for question in questions:
            ranked = raw.search(question.question, max(ks))
            tally.baseline_hits.update(k for k in ks if recall_at_k(ranked, question.evidence, k))
    finally:
        raw.close()


@contextmanager
def _extractor(llm: bool) -> Iterator[str]:
    """The configured model with `llm`, else the offline rule extractor even when a key is
    set: the key is hidden from the pipeline for the run."""
    key = os.environ.get(LLM_KEY)
    if llm:
        if not key:
            raise LlmKeyMissing(f"--llm needs {LLM_KEY} set (the configured model's key)")
        yield "llm"
        return
    os.environ.pop(LLM_KEY, None)
    try:
        yield "rules"
    finally:
        if key is not None:
            os.environ[LLM_KEY] = key


def _per_1000(count: float, turns: int) -> float:
    return round(1000 * count / turns, 3) if turns else 0.0


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _report(
    dataset: DatasetData, extractor: str, tally: _Tally, ks: Sequence[int]
) -> DatasetReport:
    by_stage = dict.fromkeys(stage_names(), 0)  # pipeline order, every stage
    by_reason: Counter[str] = Counter()
    for (stage, label), count in tally.dropped.items():
        by_stage[stage] = by_stage.get(stage, 0) + count
        by_reason[label] += count
    changes = sum(len(c.changes) for c in dataset.conversations)
    noise = sum(len(c.noise_refs) for c in dataset.conversations)
    return DatasetReport(
        name=dataset.name,
        format=dataset.format.value,
        extractor=extractor,
        conversations=len(dataset.conversations),
        runs=sum(len(c.users) for c in dataset.conversations),
        conversation_turns=sum(len(c.turns) for c in dataset.conversations),
        turns=tally.turns,
        dropped_by_stage=by_stage,
        dropped_by_reason=dict(by_reason.most_common()),
        candidates=tally.candidates,
        candidates_dropped_by_reason=dict(tally.candidates_dropped.most_common()),
        fact_bearing_turns=tally.fact_bearing,
        fact_bearing_recall=_ratio(tally.fact_bearing_kept, tally.fact_bearing),
        llm_calls=tally.llm_calls,
        llm_calls_per_turn=round(tally.llm_calls / tally.turns, 4) if tally.turns else 0.0,
        deferred_turns=tally.deferred,
        failed_turns=tally.failed,
        memories_per_1000_turns=_per_1000(tally.memories, tally.turns),
        supersessions=tally.supersessions,
        items_stored=tally.memories + tally.episodes,
        items_by_kind={"memory": tally.memories, "episode": tally.episodes},
        active_memories=tally.active,
        qa_items=tally.questions,
        recall_at_k={str(k): _ratio(tally.hits[k], tally.questions) for k in ks},
        recall_at_k_memories_only={
            str(k): _ratio(tally.memory_hits[k], tally.questions) for k in ks
        },
        baseline_items_stored=tally.baseline_items,
        baseline_raw_bm25_recall_at_k={
            str(k): _ratio(tally.baseline_hits[k], tally.questions) for k in ks
        },
        input_tokens=tally.input_tokens,
        output_tokens=tally.output_tokens,
        tokens_per_1000_turns=_per_1000(tally.input_tokens + tally.output_tokens, tally.turns),
        cost_usd=round(tally.cost_usd, 6),
        cost_usd_per_1000_turns=_per_1000(tally.cost_usd, tally.turns),
        cri=CriScore(
            changes=changes,
            changes_new_active_old_superseded=tally.changes_applied,
            noise_examples=noise,
            noise_examples_with_memory=tally.noise_with_memory,
        )
        if changes or noise
        else None,
    )


def _record_dirs(
    record: Path | None, runs: Sequence[tuple[str, ConversationData, str]]
) -> list[Path | None]:
    """Each run's recording directory under `record` (`--record`); none may exist yet."""
    if record is None:
        return [None] * len(runs)
    dirs: list[Path | None] = []
    for dataset, conversation, user in runs:
        # A CRI conversation is named after its data set: its name once, not twice.
        parts = dict.fromkeys((dataset, conversation.name, user))
        directory = record / _safe_id("-".join(parts))
        if directory.exists():
            raise RecordingExists(f"{directory} already holds a recording")
        dirs.append(directory)
    return dirs


def _settings_file() -> dict[str, object]:
    """The MEMWRITE_CONFIG file's content ({}: every default), as a replay must use it, but
    for its API keys: a recording is shared, and a replay runs with a key of its own."""
    path = os.environ.get("MEMWRITE_CONFIG")
    if not path:
        return {}
    content: dict[str, object] = json.loads(Path(path).read_text(encoding="utf-8"))
    content.pop("api_keys", None)
    return content


def _record_run(
    directory: Path,
    sessions: list[dict[str, object]],
    queries: list[str],
    search_k: int,
    run: LocalRun,
) -> None:
    from memwrite.config.settings import load_settings

    extract = load_settings().pipeline.extract
    recording = RunRecording(
        name=directory.name,
        provider=extract.provider,
        model=extract.model,
        prompts=prompt_versions(),
        config=_settings_file(),
        sessions=sessions,
        queries=queries,
        search_k=search_k,
        outcome=outcome_of(run, sessions),
    )
    write_recording(directory, recording)


def evaluate(
    datasets: Sequence[DatasetData],
    *,
    ks: Sequence[int] = DEFAULT_KS,
    llm: bool = False,
    progress: bool = False,
    record: Path | None = None,
) -> list[DatasetReport]:
    """Every conversation of every data set, once per user, each on a fresh state.

    With `record` (and `llm`), each run's model exchanges, inputs and outcome are written to a
    directory of its own under it (`memwrite_local.evaluation.recording`).
    """
    runs = [
        (index, conversation, user)
        for index, dataset in enumerate(datasets)
        for conversation in dataset.conversations
        for user in conversation.users
    ]
    if record is not None and not llm:
        raise ValueError("eval: --record needs --llm (without a model there is nothing to record)")
    record_dirs = _record_dirs(
        record, [(datasets[index].name, conversation, user) for index, conversation, user in runs]
    )
    tallies = [_Tally() for _ in datasets]
    with _extractor(llm) as extractor:
        bar = tqdm(runs, desc="memwrite eval", unit="run", disable=not progress, leave=False)
        for (index, conversation, user), record_dir in zip(bar, record_dirs, strict=True):
            bar.set_postfix_str(f"{conversation.name} as {user}")
            questions = [
                q for q in conversation.questions if question_user(q, conversation) == user
            ]
            sessions = sessions_as(conversation, user)
            queries = [q.question for q in questions]
            recorder = {} if record_dir is None else {LLM_RECORD: str(record_dir / EXCHANGES_DIR)}
            run = run_sessions(sessions, queries, search_k=max(ks), extra_env=recorder)
            if record_dir is not None:
                _record_run(record_dir, sessions, queries, max(ks), run)
            tally = tallies[index]
            tally.questions += len(questions)
            _score_run(tally, conversation, user, run, questions=questions, ks=ks)
            _score_baseline(tally, conversation, user, questions=questions, ks=ks)
    return [
        _report(dataset, extractor, tally, ks)
        for dataset, tally in zip(datasets, tallies, strict=True)
    ]
