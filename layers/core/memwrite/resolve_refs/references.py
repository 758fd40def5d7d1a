"""Stage 3, resolve refs: tie every candidate's entity to one of the user's entities.

The cascade runs cheapest first and stops at the first step that decides:

1. pronoun rules: I/me/my/myself/we/"user" are the user; he/she/they/it are the one compatible
   entity mentioned earlier in the batch (compatibility from the relation aliases: "my sister"
   is she, "my dad" is he, a bare name fits he, she and they; two or more compatible ones are
   ambiguous, none is a failure);
2. grammar: "my sister", "the user's manager", "Mom" are the entity carrying that relation alias;
   a relation claim with a name ("user | sister | Ana") gives "Ana" the alias "my sister";
3. exact alias, then fuzzy alias match (rapidfuzz WRatio) against names and aliases;
4. one LLM judge call for everything still ambiguous.

`resolve_batch` runs them in the order of docs/design.md §3: the batch's relation claims first
(they teach the aliases), then self references, grammar and names, pronouns last (once every
name of the batch is known), then the judge.

Offline (no judge) an ambiguous reference is `Unresolved` (`ResolutionFailed`): no dangling "she"
is ever stored. A name nobody matched is a new entity with a content-addressed id. Aliases only
accumulate: a fuzzy or judged match adds the surface form to the entity.

`resolve_batch` is pure: entities in, resolutions and entity upserts out; the caller loads the
user's entities and persists the upserts.

Steps 1 and 2 read the entity field with the pronoun and grammar rules of `grammar.py`; the
alias matching, the judge and the rewriting of candidates are here.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from rapidfuzz import fuzz, process

from memwrite.claims.candidate import USER_ENTITY, Candidate
from memwrite.claims.entities import (
    Entity,
    EntityKind,
    entity_id_for,
    merge_entities,
    normalise_name,
)
from memwrite.costs.usage import LlmUsage
from memwrite.errors import MalformedLlmOutput
from memwrite.model_ports import ResolveJudge
from memwrite.prompts.resolve_refs import (
    NEW,
    UNRESOLVED,
    JudgeEntity,
    JudgeReference,
    JudgeTurn,
    ReferenceKind,
    ResolveDecision,
    ResolvePromptInput,
    ResolveResult,
    render,
)
from memwrite.resolve_refs.grammar import (
    POSSESSIVE_PRONOUNS,
    Ref,
    RefKind,
    Relation,
    classify,
    is_relation_alias,
    is_relation_word,
    name_key,
    parse_relation,
    pronoun_fits,
)

__all__ = [
    "FUZZY_ACCEPT",
    "FUZZY_AMBIGUOUS",
    "MAX_JUDGE_OPTIONS",
    "NICKNAME_MAX_CHARS",
    "NICKNAME_MIN_CHARS",
    "BatchResolution",
    "Resolution",
    "ResolutionMethod",
    "ResolvedCandidate",
    "Unresolved",
    "resolve_batch",
]

logger = logging.getLogger(__name__)

# WRatio, 0-100. A name scoring at least FUZZY_ACCEPT against one entity, in a form that is a
# plausible variant of it (see `_is_variant`), is that entity; a score in
# [FUZZY_AMBIGUOUS, FUZZY_ACCEPT), a non-variant high score or several accepted entities go to
# the judge; below FUZZY_AMBIGUOUS the name is new. WRatio caps a pure substring match at 90
# ("Pri" in "Priya", "Patel" in "Raj Patel"), so 90 is the score of every prefix and token
# subset; 75 keeps one-letter spelling variants ("Ana"/"Anna" 85.7, "Katie"/"Kate" 88.9) and
# near names ("Mark"/"Marcus" 77.1) for the judge and lets distinct names ("Bob"/"Robert" 60) go.
FUZZY_ACCEPT: Final = 90.0
FUZZY_AMBIGUOUS: Final = 75.0
# A short form that begins a name ("Pri", "Sam", "Jess") is a nickname; a longer one that only
# begins it ("Priya" in "Priyanka") is more likely someone else.
NICKNAME_MIN_CHARS: Final = 3
NICKNAME_MAX_CHARS: Final = 4
# Options the judge sees per reference; more are listed most relevant first and cut.
MAX_JUDGE_OPTIONS: Final = 8

_MALFORMED_ATTEMPTS: Final = 2  # the first answer plus one retry

# Predicates only a person has: the subject of "lives_in" is a new person, not a thing.
_PERSON_PREDICATES: Final = frozenset(
    {
        "age",
        "birthday",
        "diet",
        "hometown",
        "job_title",
        "lives_in",
        "name",
        "occupation",
        "studies_at",
        "works_at",
    }
)

_DETAIL_NO_ANTECEDENT: Final = "no compatible entity is mentioned in the batch up to this turn"
_DETAIL_NO_JUDGE: Final = "ambiguous reference and no LLM judge configured"
_DETAIL_JUDGE_UNSURE: Final = "the LLM judge could not tell which entity is meant"
_DETAIL_JUDGE_MALFORMED: Final = "the LLM judge answer stayed malformed after a retry"
_DETAIL_NOT_IN_TEXT: Final = "the claim's text does not contain its reference as a word"
_DETAIL_TEXT_REFUSED: Final = "the claim's text with the canonical name breaks the schema"


class ResolutionMethod(StrEnum):
    """Which step of the cascade decided."""

    SELF = "self"
    PRONOUN = "pronoun"
    GRAMMAR = "grammar"
    ALIAS = "alias"
    FUZZY = "fuzzy"
    LLM = "llm"
    NEW = "new"


class ResolvedCandidate(BaseModel):
    """A candidate tied to an entity; its `entity` is now the canonical name ("user" for the
    speaker) and its text names that entity."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    outcome: Literal["resolved"] = "resolved"
    candidate: Candidate
    entity_id: str
    method: ResolutionMethod
    new_aliases: tuple[str, ...] = Field(
        default=(), description="Surface forms this candidate added to the entity's aliases."
    )


class Unresolved(BaseModel):
    """A candidate whose reference could not be tied to one entity; it is not stored."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    outcome: Literal["unresolved"] = "unresolved"
    candidate: Candidate
    reason: Literal["ResolutionFailed"] = "ResolutionFailed"
    detail: str = Field(description="Why, in words that quote no user content.")


Resolution = Annotated[ResolvedCandidate | Unresolved, Field(discriminator="outcome")]


@dataclass(frozen=True)
class BatchResolution:
    """One resolution per input candidate (same order), the entities to upsert, LLM usage."""

    resolutions: tuple[Resolution, ...]
    upserts: tuple[Entity, ...]
    llm_calls: tuple[LlmUsage, ...] = ()
    judge_malformed: int = 0  # malformed judge answers: the `resolve_json_fail` metric


def _is_variant(query: str, choice: str) -> bool:
    """Whether a high-scoring `query` looks like a form of `choice` rather than another name:
    near-identical spelling, a subset of its words (initials allowed: "Priya S."), or a short
    nickname that begins one of its words ("Pri" -> "Priya")."""
    if fuzz.ratio(query, choice) >= FUZZY_ACCEPT:
        return True
    query_words, choice_words = query.split(), choice.split()

    def covered(words: Sequence[str], by: Sequence[str]) -> bool:
        return all(any(b == w or (len(w) == 1 and b.startswith(w)) for b in by) for w in words)

    if covered(query_words, choice_words) or covered(choice_words, query_words):
        return True
    return (
        len(query_words) == 1
        and NICKNAME_MIN_CHARS <= len(query) <= NICKNAME_MAX_CHARS
        and any(word.startswith(query) for word in choice_words)
    )


# --------------------------------------------------------------------------------------------
# Working state of one batch
# --------------------------------------------------------------------------------------------


@dataclass
class _Decision:
    entity_id: str
    method: ResolutionMethod
    new_aliases: tuple[str, ...] = ()


@dataclass
class _Pending:
    """A reference for the judge; name references with the same words share one."""

    ref: Ref
    options: list[str]
    new_kind: EntityKind | None  # None: "new" is no answer (pronouns, relations, "this")
    candidate_indexes: list[int] = field(default_factory=list)


@dataclass
class _Batch:
    tenant: str
    user_id: str
    at: datetime
    entities: dict[str, Entity]  # known, then created in this batch; most recent first
    touched: list[str] = field(default_factory=list)
    mentions: list[tuple[int, int, str]] = field(default_factory=list)  # (turn, pos, id)

    @property
    def user_entity_id(self) -> str:
        return entity_id_for(self.tenant, self.user_id, USER_ENTITY)

    def others(self) -> list[Entity]:
        return [e for e in self.entities.values() if not e.is_user]

    def see(
        self,
        name: str,
        kind: EntityKind,
        aliases: Iterable[str] = (),
    ) -> tuple[str, tuple[str, ...]]:
        """Record a sighting of the entity called `name` (creating it if new); returns its id
        and the aliases this sighting added."""
        sighting = Entity.create(
            self.tenant, self.user_id, name, kind=kind, at=self.at, aliases=aliases
        )
        stored = self.entities.get(sighting.entity_id)
        merged = sighting if stored is None else merge_entities(stored, sighting)
        added = merged.aliases if stored is None else merged.aliases[len(stored.aliases) :]
        self.entities[merged.entity_id] = merged
        if merged.entity_id not in self.touched:
            self.touched.append(merged.entity_id)
        return merged.entity_id, added

    def mention(self, turn: int, position: int, entity_id: str) -> None:
        self.mentions.append((turn, position, entity_id))

    def with_alias(self, entity_ids: Iterable[str], alias: str) -> list[str]:
        key = normalise_name(alias)
        return [
            i for i in entity_ids if any(normalise_name(a) == key for a in self.entities[i].aliases)
        ]

    def by_relation(self, relation: Relation) -> list[str]:
        """The entities called "my <relation>"; once one of them has a name, the placeholder
        created before the name was known ("the user's manager") steps aside."""
        matches = self.with_alias((e.entity_id for e in self.others()), relation.alias)
        placeholder = normalise_name(relation.placeholder)
        named = [i for i in matches if normalise_name(self.entities[i].name) != placeholder]
        return named or matches

    def exact(self, surface: str) -> list[str]:
        key = name_key(surface)
        return [
            e.entity_id for e in self.others() if any(name_key(n) == key for n in _plain_names(e))
        ]

    def fuzzy(self, surface: str) -> tuple[list[str], list[str]]:
        """(accepted, band): entities whose best name is an accepted variant, and every entity
        scoring at least FUZZY_AMBIGUOUS, best first."""
        query = name_key(surface)
        choices = [(name_key(n), e.entity_id) for e in self.others() for n in _plain_names(e)]
        best: dict[str, tuple[float, bool]] = {}
        for choice, score, index in process.extract(
            query,
            [c for c, _ in choices],
            scorer=fuzz.WRatio,
            processor=None,
            score_cutoff=FUZZY_AMBIGUOUS,
            limit=None,
        ):
            entity_id = choices[index][1]
            accepted = score >= FUZZY_ACCEPT and _is_variant(query, choice)
            seen_score, seen_accepted = best.get(entity_id, (0.0, False))
            best[entity_id] = (max(score, seen_score), accepted or seen_accepted)
        band = sorted(best, key=lambda i: best[i][0], reverse=True)
        return [i for i in band if best[i][1]], band

    def upserts(self) -> tuple[Entity, ...]:
        return tuple(self.entities[i] for i in self.touched)


def _plain_names(entity: Entity) -> list[str]:
    """The names fuzzy matching may hit: the name and aliases, not "my sister"-style ones."""
    return [n for n in (entity.name, *entity.aliases) if not is_relation_alias(n)]


def _name_kind(candidate: Candidate) -> EntityKind:
    if candidate.attribute in _PERSON_PREDICATES or is_relation_word(candidate.attribute):
        return EntityKind.PERSON
    return EntityKind.OTHER


# --------------------------------------------------------------------------------------------
# The cascade
# --------------------------------------------------------------------------------------------


def _resolve_name(
    batch: _Batch, surface: str, kind: EntityKind, extra_aliases: Sequence[str] = ()
) -> _Decision | list[str]:
    """Exact alias, fuzzy, or new; a list is the options of an ambiguous name."""
    exact = batch.exact(surface)
    if len(exact) == 1:
        entity = batch.entities[exact[0]]
        entity_id, added = batch.see(entity.name, kind, [surface, *extra_aliases])
        return _Decision(entity_id, ResolutionMethod.ALIAS, added)
    if exact:
        return exact
    accepted, band = batch.fuzzy(surface)
    if len(accepted) == 1:
        entity = batch.entities[accepted[0]]
        entity_id, added = batch.see(entity.name, kind, [surface, *extra_aliases])
        return _Decision(entity_id, ResolutionMethod.FUZZY, added)
    if band:
        return band
    entity_id, added = batch.see(surface.strip(), kind, extra_aliases)
    return _Decision(entity_id, ResolutionMethod.NEW, added)


def _resolve_relation_object(batch: _Batch, candidate: Candidate, turn: int, text: str) -> None:
    """ "user | sister | Ana": Ana is a person with the alias "my sister". When Ana's name is
    ambiguous, an option already called "my sister" settles it; otherwise nothing is learnt."""
    if candidate.negated or classify(candidate.entity).kind is not RefKind.SELF:
        return
    if not is_relation_word(candidate.attribute):
        return
    if classify(candidate.value).kind is not RefKind.NAME:
        return
    relation = parse_relation(candidate.attribute)
    outcome = _resolve_name(batch, candidate.value, relation.kind, [relation.alias])
    if isinstance(outcome, list):
        same_relation = batch.with_alias(outcome, relation.alias)
        if len(same_relation) != 1:
            return
        entity = batch.entities[same_relation[0]]
        entity_id, _ = batch.see(entity.name, relation.kind, [candidate.value])
    else:
        entity_id = outcome.entity_id
    batch.mention(turn, _offset(candidate.value, candidate, text) or 0, entity_id)


def _offset(words: str, candidate: Candidate, text: str) -> int | None:
    """Where `words` first stand in the claim's turn text, from the claim's evidence on;
    None when they do not appear there as words."""
    span = candidate.source_span
    start = span.start if span is not None and span.start < len(text) else 0
    match = _find(words, text[start:])
    return None if match is None else start + match.start()


def _resolve_direct(batch: _Batch, ref: Ref, candidate: Candidate) -> _Decision | _Pending:
    """Steps 1-3 for every reference that does not depend on the batch window."""
    if ref.kind is RefKind.SELF:
        return _Decision(batch.user_entity_id, ResolutionMethod.SELF)
    if ref.relation is not None:
        matches = batch.by_relation(ref.relation)
        if len(matches) == 1:
            entity = batch.entities[matches[0]]
            entity_id, added = batch.see(entity.name, ref.relation.kind)
            return _Decision(entity_id, ResolutionMethod.GRAMMAR, added)
        if matches:
            return _Pending(ref, matches, new_kind=None)
        entity_id, added = batch.see(
            ref.relation.placeholder, ref.relation.kind, [ref.relation.alias]
        )
        return _Decision(entity_id, ResolutionMethod.GRAMMAR, added)
    kind = _name_kind(candidate)
    outcome = _resolve_name(batch, ref.surface, kind)
    if isinstance(outcome, list):
        return _Pending(ref, outcome, new_kind=kind)
    return outcome


def _scan_mentions(batch: _Batch, texts: Sequence[str]) -> None:
    """Every known name or alias written in a turn is a mention; relation aliases ("my
    sister") match in any case, names only as written, so "may" is not "May"."""
    for entity in batch.others():
        for name in (entity.name, *entity.aliases):
            flags = re.IGNORECASE if is_relation_alias(name) else 0
            words = r"\s+".join(re.escape(w) for w in name.split())
            pattern = re.compile(rf"(?<!\w){words}(?!\w)", flags)
            for turn, text in enumerate(texts):
                for match in pattern.finditer(text):
                    batch.mention(turn, match.start(), entity.entity_id)


def _window(batch: _Batch, turn: int, before: int) -> list[str]:
    """Entities mentioned earlier in the batch: in an earlier turn, or in this one before
    offset `before`; most recent first."""
    earlier = (m for m in batch.mentions if m[0] < turn or (m[0] == turn and m[1] < before))
    ordered: list[str] = []
    for _, _, entity_id in sorted(earlier):
        if entity_id in ordered:
            ordered.remove(entity_id)
        ordered.append(entity_id)
    return ordered[::-1]


def _resolve_in_window(
    batch: _Batch, ref: Ref, candidate: Candidate, turn: int, text: str
) -> _Decision | _Pending | str:
    """Step 1 for pronouns and vague references; a string is why it cannot be resolved.
    "She told me Priya left" does not make Priya "she": only what comes before counts."""
    before = _offset(ref.surface, candidate, text)
    window = _window(batch, turn, len(text) if before is None else before)
    if ref.kind is RefKind.PRONOUN:
        pronoun = normalise_name(ref.surface)
        window = [i for i in window if pronoun_fits(pronoun, batch.entities[i])]
        if len(window) == 1:
            entity = batch.entities[window[0]]
            entity_id, _ = batch.see(entity.name, entity.kind)
            return _Decision(entity_id, ResolutionMethod.PRONOUN)
    if not window:
        return _DETAIL_NO_ANTECEDENT
    return _Pending(ref, window, new_kind=None)


# --------------------------------------------------------------------------------------------
# Step 4: the judge
# --------------------------------------------------------------------------------------------


_JUDGE_KINDS: Final[dict[RefKind, ReferenceKind]] = {
    RefKind.NAME: "name",
    RefKind.PRONOUN: "pronoun",
    RefKind.RELATION: "relation",
    RefKind.VAGUE: "vague",
}


def _judge_input(
    batch: _Batch,
    pending: Sequence[_Pending],
    candidates: Sequence[Candidate],
    turns: Mapping[str, str],
) -> tuple[ResolvePromptInput, dict[str, str]]:
    """The prompt input and its entity refs ("E1" -> entity id)."""
    turn_refs = {turn_id: f"T{index}" for index, turn_id in enumerate(turns, start=1)}
    entity_refs: dict[str, str] = {}
    for item in pending:
        for entity_id in item.options[:MAX_JUDGE_OPTIONS]:
            if entity_id not in entity_refs:
                entity_refs[entity_id] = f"E{len(entity_refs) + 1}"
    references = []
    for position, item in enumerate(pending, start=1):
        first = candidates[item.candidate_indexes[0]]
        references.append(
            JudgeReference(
                ref=f"R{position}",
                words=item.ref.surface,
                kind=_JUDGE_KINDS[item.ref.kind],
                claim=first.text,
                turn_ref=turn_refs.get(first.source_turn_id or ""),
                options=tuple(entity_refs[i] for i in item.options[:MAX_JUDGE_OPTIONS]),
                may_be_new=item.new_kind is not None,
            )
        )
    entities = tuple(
        JudgeEntity(
            ref=ref,
            name=batch.entities[entity_id].name,
            kind=batch.entities[entity_id].kind.value,
            aliases=batch.entities[entity_id].aliases,
        )
        for entity_id, ref in entity_refs.items()
    )
    inp = ResolvePromptInput(
        turns=tuple(JudgeTurn(ref=turn_refs[i], text=text) for i, text in turns.items()),
        entities=entities,
        references=tuple(references),
    )
    return inp, {ref: entity_id for entity_id, ref in entity_refs.items()}


def _problem(result: ResolveResult, inp: ResolvePromptInput) -> str | None:
    """Why a schema-valid answer is still unusable: a gap, a repeat, an answer outside the
    reference's options; None when every reference has one allowed answer."""
    references = {reference.ref: reference for reference in inp.references}
    answered: set[str] = set()
    for decision in result.decisions:
        reference = references.get(decision.ref)
        if reference is None or decision.ref in answered:
            return "a decision names an unknown or repeated ref"
        allowed = {*reference.options, UNRESOLVED, *((NEW,) if reference.may_be_new else ())}
        if decision.answer not in allowed:
            return f"{decision.ref}: answer outside its options"
        answered.add(decision.ref)
    if len(answered) != len(references):
        return f"{len(references) - len(answered)} refs not answered"
    return None


@dataclass(frozen=True)
class _JudgeOutcome:
    decisions: dict[str, ResolveDecision] | None  # None: still malformed after the retry
    calls: tuple[LlmUsage, ...]
    malformed: int


def _ask(judge: ResolveJudge, model: str, inp: ResolvePromptInput) -> _JudgeOutcome:
    """One judge call, and one retry when its answer is malformed."""
    prompt = render(inp)
    calls: list[LlmUsage] = []
    for attempt in range(1, _MALFORMED_ATTEMPTS + 1):
        try:
            result, usage = judge.judge(prompt.system, prompt.messages, model)
        except MalformedLlmOutput as exc:
            calls.append(exc.usage)
            problem: str | None = str(exc)
        else:
            problem = _problem(result, inp)
            if problem is None:
                calls.append(usage)
                decisions = {decision.ref: decision for decision in result.decisions}
                return _JudgeOutcome(decisions, tuple(calls), malformed=attempt - 1)
            calls.append(replace(usage, malformed=True))  # valid JSON, unusable answer
        logger.warning("resolve judge output malformed (attempt %d): %s", attempt, problem)
    return _JudgeOutcome(None, tuple(calls), malformed=_MALFORMED_ATTEMPTS)


def _apply_decision(
    batch: _Batch, item: _Pending, decision: ResolveDecision, entity_refs: Mapping[str, str]
) -> _Decision | str:
    if decision.answer == UNRESOLVED:
        return _DETAIL_JUDGE_UNSURE
    chosen = entity_refs.get(decision.answer)
    if chosen is None:  # "new", which `_problem` allows for names only
        kind = item.new_kind or EntityKind.OTHER
        entity_id, added = batch.see(item.ref.surface.strip(), kind)
        return _Decision(entity_id, ResolutionMethod.LLM, added)
    entity = batch.entities[chosen]
    aliases = [item.ref.surface] if item.ref.kind is RefKind.NAME else []
    entity_id, added = batch.see(entity.name, entity.kind, aliases)
    return _Decision(entity_id, ResolutionMethod.LLM, added)


@dataclass(frozen=True)
class _Judged:
    outcomes: dict[int, _Decision | str]  # candidate index -> decision or why not
    calls: tuple[LlmUsage, ...] = ()
    malformed: int = 0


def _judge_all(
    batch: _Batch,
    items: Sequence[_Pending],
    candidates: Sequence[Candidate],
    turns: Mapping[str, str],
    *,
    judge: ResolveJudge | None,
    model: str,
) -> _Judged:
    """Step 4: one call for every pending reference; offline, each one fails."""
    if not items:
        return _Judged({})
    if judge is None:
        return _Judged({i: _DETAIL_NO_JUDGE for item in items for i in item.candidate_indexes})
    inp, entity_refs = _judge_input(batch, items, candidates, turns)
    asked = _ask(judge, model, inp)
    outcomes: dict[int, _Decision | str] = {}
    for reference, item in zip(inp.references, items, strict=True):
        decided: _Decision | str = _DETAIL_JUDGE_MALFORMED
        if asked.decisions is not None:
            decided = _apply_decision(batch, item, asked.decisions[reference.ref], entity_refs)
        outcomes.update(dict.fromkeys(item.candidate_indexes, decided))
    return _Judged(outcomes, asked.calls, asked.malformed)


# --------------------------------------------------------------------------------------------
# Rewriting the candidate
# --------------------------------------------------------------------------------------------


def _find(words: str, text: str) -> re.Match[str] | None:
    """The first occurrence of `words` in `text` as whole words, in any case and spacing."""
    pattern = r"\s+".join(re.escape(w) for w in words.split())
    return re.search(rf"(?<!\w){pattern}(?!\w)", text, re.IGNORECASE)


def _rewritten(candidate: Candidate, ref: Ref, entity: Entity | None) -> Candidate | str:
    """The candidate with its entity set to the canonical name and its text naming it; a
    string says why that is impossible."""
    if entity is None:
        return candidate.model_copy(update={"entity": USER_ENTITY})
    name = entity.name
    if _find(name, candidate.text) is not None:
        # Entity and text agree already ("Ana, the user's sister, ..."): only the field moves.
        return candidate.model_copy(update={"entity": name})
    match = _find(ref.surface, candidate.text)
    if match is None:
        return _DETAIL_NOT_IN_TEXT
    replacement = name
    lowered = normalise_name(ref.surface)
    if ref.kind is RefKind.PRONOUN and (
        lowered in POSSESSIVE_PRONOUNS
        or (lowered == "her" and re.match(r"\s+\w", candidate.text[match.end() :]))
    ):
        replacement = f"{name}'s"  # "her new job" -> "Ana's new job"
    elif ref.relation is not None and normalise_name(name) != normalise_name(
        ref.relation.placeholder
    ):
        replacement = f"{name} ({ref.relation.placeholder})"
    text = candidate.text[: match.start()] + replacement + candidate.text[match.end() :]
    try:
        return Candidate.model_validate(candidate.model_dump() | {"entity": name, "text": text})
    except ValidationError:
        return _DETAIL_TEXT_REFUSED


def _resolution(
    batch: _Batch, candidate: Candidate, ref: Ref, outcome: _Decision | str
) -> Resolution:
    if isinstance(outcome, str):
        return Unresolved(candidate=candidate, detail=outcome)
    entity = None if ref.kind is RefKind.SELF else batch.entities[outcome.entity_id]
    rewritten = _rewritten(candidate, ref, entity)
    if isinstance(rewritten, str):
        return Unresolved(candidate=candidate, detail=rewritten)
    return ResolvedCandidate(
        candidate=rewritten,
        entity_id=outcome.entity_id,
        method=outcome.method,
        new_aliases=outcome.new_aliases,
    )


# --------------------------------------------------------------------------------------------
# The stage
# --------------------------------------------------------------------------------------------


def resolve_batch(
    candidates: Sequence[Candidate],
    turns: Mapping[str, str],
    known: Sequence[Entity],
    *,
    tenant: str,
    user_id: str,
    at: datetime,
    judge: ResolveJudge | None,
    model: str,
) -> BatchResolution:
    """Resolve the entity of every candidate of one batch.

    `turns` maps the batch's turn ids to their texts, in conversation order; `known` is the
    user's entities, most recently seen first; `at` is when this batch saw them (the latest
    turn's time, so a redelivery upserts the same rows). Candidates whose `source_turn_id` is
    not in `turns` see the whole batch. `judge` is called at most twice (one retry of a
    malformed answer) with `model`, and only when some reference is still ambiguous; offline
    (None) those are `Unresolved`. `LlmUnavailable` and `LlmRequestRejected` propagate.
    """
    batch = _Batch(tenant, user_id, at, {e.entity_id: e for e in known})
    texts = list(turns.values())
    turn_index = {turn_id: index for index, turn_id in enumerate(turns)}
    refs = [classify(candidate.entity) for candidate in candidates]

    def turn_of(i: int) -> int:
        return turn_index.get(candidates[i].source_turn_id or "", len(texts))

    def text_of(i: int) -> str:
        return turns.get(candidates[i].source_turn_id or "", "")

    order = sorted(range(len(candidates)), key=turn_of)
    in_window = (RefKind.PRONOUN, RefKind.VAGUE)
    # Relation claims first: "my sister Ana" teaches the alias every later step relies on.
    for i in order:
        _resolve_relation_object(batch, candidates[i], turn_of(i), text_of(i))
    outcomes: dict[int, _Decision | _Pending | str] = {}
    for i in order:
        if refs[i].kind not in in_window:
            decided = _resolve_direct(batch, refs[i], candidates[i])
            if isinstance(decided, _Decision) and decided.method is not ResolutionMethod.SELF:
                where = _offset(candidates[i].entity, candidates[i], text_of(i)) or 0
                batch.mention(turn_of(i), where, decided.entity_id)
            outcomes[i] = decided
    # Pronouns last, once every name of the batch is known and every turn scanned for them.
    _scan_mentions(batch, texts)
    for i in order:
        if refs[i].kind in in_window:
            outcomes[i] = _resolve_in_window(batch, refs[i], candidates[i], turn_of(i), text_of(i))

    pending: dict[tuple[str, str], _Pending] = {}
    for i in order:
        outcome = outcomes[i]
        if isinstance(outcome, _Pending):
            # One decision per ambiguous name, so the judge cannot split its claims up.
            named = outcome.new_kind is not None
            key = ("name", name_key(refs[i].surface)) if named else ("at", str(i))
            pending.setdefault(key, outcome).candidate_indexes.append(i)
    judged = _judge_all(batch, list(pending.values()), candidates, turns, judge=judge, model=model)
    final = {i: o for i, o in outcomes.items() if not isinstance(o, _Pending)} | judged.outcomes
    resolutions = tuple(
        _resolution(batch, candidate, refs[i], final[i]) for i, candidate in enumerate(candidates)
    )
    return BatchResolution(resolutions, batch.upserts(), judged.calls, judged.malformed)
