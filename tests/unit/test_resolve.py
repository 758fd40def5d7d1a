"""Resolve refs: each step of the cascade, the judge only for what stays ambiguous, stable ids.

`ScriptedJudge` stands in for the LLM: it answers from a script and records every call, so a
test can assert that a deterministic step decided without it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memwrite.adapters.in_memory import (
    CountingMetrics,
    InMemoryEntityStore,
    InMemorySessionLog,
    InMemorySpanStore,
    InMemoryTurnLedger,
)
from memwrite.claims.candidate import Candidate, MemoryType, Quality
from memwrite.claims.entities import (
    Entity,
    EntityKind,
    entity_id_for,
    merge_entities,
)
from memwrite.config.settings import PipelineConfig
from memwrite.costs.usage import LlmUsage
from memwrite.errors import LlmUnavailable, MalformedLlmOutput
from memwrite.extract.rules import extract_with_rules
from memwrite.model_ports import ResolveJudge
from memwrite.models import QueuedTurn, Role, Source
from memwrite.payloads import ExtractedTurn, Extractor, ExtractOutput
from memwrite.ports import TraceRecord
from memwrite.prompts import PromptMessage
from memwrite.prompts.resolve_refs import ResolveDecision, ResolveResult
from memwrite.reasons import UserErased
from memwrite.resolve_refs import stage as resolve_stage
from memwrite.resolve_refs.references import (
    BatchResolution,
    ResolutionMethod,
    ResolvedCandidate,
    Unresolved,
    resolve_batch,
)
from memwrite.resolve_refs.stage import ResolveDeps, save_entity

TENANT, USER = "acme", "u-1"
MODEL = "claude-haiku-4-5"
AT = datetime(2025, 3, 14, 10, 0, tzinfo=UTC)
USAGE = LlmUsage(model=MODEL, input_tokens=900, output_tokens=30, cost_usd=0.00105)
SOURCES = ("trace-1",)  # the traces an entity write comes from (no ledger here: not checked)


def cand(entity: str, text: str, turn: str = "t1", **changes: Any) -> Candidate:
    """A claim about `entity`; `text` must contain the entity and the value."""
    fields: dict[str, Any] = {
        "text": text,
        "type": MemoryType.FACT,
        "topic": "misc",
        "entity": entity,
        "attribute": "likes",
        "value": "tea",
        "predicate_is_stateful": False,
        "importance": 0.5,
        "confidence": 0.9,
        "grounded": True,
        "quality": Quality(verdict="keep", reason="explicit statement"),
        "search_questions": ["What?", "Who?", "Which?"],
        "source_turn_id": turn,
    }
    return Candidate(**(fields | changes))


def rules(text: str, turn: str = "t1") -> list[Candidate]:
    return list(
        extract_with_rules(text, role="user", observed_at=AT, source_turn_id=turn).candidates
    )


def entity(
    name: str,
    kind: EntityKind = EntityKind.PERSON,
    aliases: Sequence[str] = (),
    days_ago: int = 1,
) -> Entity:
    seen = AT - timedelta(days=days_ago)
    return Entity.create(TENANT, USER, name, kind=kind, at=seen, aliases=aliases)


def eid(name: str) -> str:
    return entity_id_for(TENANT, USER, name)


def decide(*answers: tuple[str, str]) -> ResolveResult:
    return ResolveResult(
        decisions=[
            ResolveDecision(ref=ref, answer=answer, reason="test") for ref, answer in answers
        ]
    )


@dataclass
class ScriptedJudge:
    """A `ResolveJudge` answering from a script (answers, or errors to raise), in order."""

    script: deque[ResolveResult | Exception] = field(default_factory=deque)
    calls: list[tuple[str, list[PromptMessage], str]] = field(default_factory=list)

    def judge(
        self, system: str, messages: Sequence[PromptMessage], model: str
    ) -> tuple[ResolveResult, LlmUsage]:
        self.calls.append((system, list(messages), model))
        answer = self.script.popleft()
        if isinstance(answer, Exception):
            raise answer
        return answer, USAGE

    @property
    def references(self) -> list[str]:
        """The <references> lines of the last call."""
        content = self.calls[-1][1][0]["content"]
        return content.split("<references>\n", 1)[1].split("\n</references>", 1)[0].splitlines()


def scripted(*answers: ResolveResult | Exception) -> ScriptedJudge:
    return ScriptedJudge(deque(answers))


def resolve(
    candidates: Sequence[Candidate],
    turns: dict[str, str],
    known: Sequence[Entity] = (),
    judge: ResolveJudge | None = None,
) -> BatchResolution:
    return resolve_batch(
        candidates, turns, known, tenant=TENANT, user_id=USER, at=AT, judge=judge, model=MODEL
    )


def resolved(out: BatchResolution) -> list[ResolvedCandidate]:
    """Every resolution, asserting each one resolved and still passes the schema (as it must
    when it crosses a Step Functions payload as JSON)."""
    done = []
    for resolution in out.resolutions:
        assert isinstance(resolution, ResolvedCandidate), resolution
        Candidate.model_validate_json(resolution.candidate.model_dump_json())
        done.append(resolution)
    return done


def upserted(out: BatchResolution, name: str) -> Entity:
    (found,) = [e for e in out.upserts if e.name == name]
    return found


# --------------------------------------------------------------------------------------------
# Step 1: pronoun rules
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("word", ["user", "I", "me", "my", "myself", "we", "User"])
def test_first_person_references_are_the_user(word: str) -> None:
    # Given a claim whose entity is the speaker, and a judge that must stay silent
    judge = scripted()
    claim = cand(word, f"The user ({word}) likes tea.")
    # When it is resolved
    out = resolve([claim], {"t1": "I like tea."}, [entity("Ana")], judge)
    # Then it is the user's own entity, and nothing is upserted or asked
    (only,) = resolved(out)
    assert only.method is ResolutionMethod.SELF
    assert only.entity_id == entity_id_for(TENANT, USER, "user")
    assert only.candidate.entity == "user"
    assert out.upserts == ()
    assert judge.calls == []


def test_pronoun_takes_the_one_compatible_entity_of_the_batch() -> None:
    # Given a sister and a brother named in T1, then "She" and "He" in T2
    turns = {"t1": "My sister Ana and my brother Tom came over.", "t2": "She brought cake."}
    claims = [
        *rules(turns["t1"]),
        cand("She", "She brought cake.", "t2", attribute="brought", value="cake"),
        cand("He", "He is a baker.", "t2", attribute="occupation", value="baker"),
    ]
    judge = scripted()
    # When the batch is resolved
    out = resolve(claims, turns, judge=judge)
    # Then "she" is Ana and "he" is Tom, by the relation table, with the names in the text
    *_, she, he = resolved(out)
    assert (she.method, she.entity_id, she.candidate.text) == (
        ResolutionMethod.PRONOUN,
        eid("Ana"),
        "Ana brought cake.",
    )
    assert (he.method, he.entity_id, he.candidate.text) == (
        ResolutionMethod.PRONOUN,
        eid("Tom"),
        "Tom is a baker.",
    )
    # And pronouns never become aliases, and the judge was not asked
    assert she.new_aliases == he.new_aliases == ()
    assert judge.calls == []


def test_possessive_pronoun_becomes_a_possessive_name() -> None:
    # Given Ana in T1 and "her" as the entity of a claim in T2
    turns = {"t1": "Ana called.", "t2": "Her new job is at Google."}
    claims = [
        cand("Ana", "Ana called the user.", attribute="called", value="the user"),
        cand("her", "Her new job is at Google.", "t2", attribute="works_at", value="Google"),
    ]
    # When the batch is resolved
    out = resolve(claims, turns)
    # Then the text reads "Ana's new job"
    assert resolved(out)[1].candidate.text == "Ana's new job is at Google."


def test_a_name_in_an_earlier_turn_text_is_an_antecedent() -> None:
    # Given a known Priya named in T1's text (no claim about her), then "she" in T2
    turns = {"t1": "Had lunch with Priya today.", "t2": "She is moving to Berlin."}
    claim = cand("she", "She is moving to Berlin.", "t2", attribute="moving_to", value="Berlin")
    # When it is resolved
    out = resolve([claim], turns, [entity("Priya"), entity("Tom", aliases=["my brother"])])
    # Then she is Priya (Tom is known but not mentioned, and a "he" anyway)
    (only,) = resolved(out)
    assert (only.method, only.entity_id) == (ResolutionMethod.PRONOUN, eid("Priya"))


def test_a_name_after_the_pronoun_is_not_its_antecedent() -> None:
    # Given a known Priya named only after "She" in the same turn
    judge = scripted()
    turn = "She told me Priya is leaving the team."
    claim = cand("She", "She told the user about the team.", attribute="told", value="the team")
    # When the pronoun is resolved
    out = resolve([claim], {"t1": turn}, [entity("Priya")], judge)
    # Then Priya is not taken for "she": nothing earlier names anyone
    (failed,) = out.resolutions
    assert isinstance(failed, Unresolved)
    assert judge.calls == []


def test_pronoun_with_two_compatible_entities_goes_to_the_judge() -> None:
    # Given Ana and Maya (genders unknown) named in T1, then "She" in T2
    turns = {"t1": "Ana and Maya came over.", "t2": "She is moving to Lisbon."}
    claims = [
        cand("Ana", "Ana came over.", attribute="visited", value="came over"),
        cand("Maya", "Maya came over.", attribute="visited", value="came over"),
        cand("She", "She is moving to Lisbon.", "t2", attribute="moving_to", value="Lisbon"),
    ]
    judge = scripted(decide(("R1", "E1")))
    # When the batch is resolved
    out = resolve(claims, turns, judge=judge)
    # Then one call asked about "She", with both women as options, most recent first
    assert len(judge.calls) == 1
    (reference,) = judge.references
    assert '"words": "She", "kind": "pronoun"' in reference
    assert '"options": ["E1", "E2"]' in reference
    # And the judge's pick stands, decided by the LLM, with its usage reported
    third = resolved(out)[2]
    assert (third.method, third.entity_id) == (ResolutionMethod.LLM, eid("Maya"))
    assert out.llm_calls == (USAGE,)


def test_pronoun_without_an_antecedent_fails_without_asking_the_judge() -> None:
    # Given known entities, none of them in the batch, and "She" as a claim's entity
    judge = scripted()
    claim = cand("She", "She got promoted.", attribute="promoted", value="promoted")
    # When it is resolved
    out = resolve([claim], {"t1": "She got promoted!"}, [entity("Ana"), entity("Maya")], judge)
    # Then it fails visibly: no dangling "she", and no call the judge could not answer
    (failed,) = out.resolutions
    assert isinstance(failed, Unresolved)
    assert failed.reason == "ResolutionFailed"
    assert failed.detail == "no compatible entity is mentioned in the batch up to this turn"
    assert judge.calls == []
    assert out.upserts == ()


def test_pronoun_offline_when_ambiguous_is_resolution_failed() -> None:
    # Given two compatible entities in the window and no judge configured
    turns = {"t1": "Ana and Maya came over. She is moving to Lisbon."}
    claims = [
        cand("Ana", "Ana came over.", attribute="visited", value="came over"),
        cand("Maya", "Maya came over.", attribute="visited", value="came over"),
        cand("She", "She is moving to Lisbon.", attribute="moving_to", value="Lisbon"),
    ]
    # When the batch is resolved offline
    out = resolve(claims, turns, judge=None)
    # Then the names resolve and the pronoun fails with ResolutionFailed
    ana, maya, she = out.resolutions
    assert isinstance(ana, ResolvedCandidate)
    assert isinstance(maya, ResolvedCandidate)
    assert isinstance(she, Unresolved)
    assert she.detail == "ambiguous reference and no LLM judge configured"


def test_text_without_the_pronoun_as_a_word_fails_instead_of_storing_a_wrong_text() -> None:
    # Given "he" as entity, but a text that only contains "he" inside "the"
    turns = {"t1": "My brother Tom moved.", "t2": "He lives in Paris now."}
    claims = [
        *rules(turns["t1"]),
        cand("he", "The user's brother lives in Paris.", "t2", attribute="lives_in", value="Paris"),
    ]
    # When the batch is resolved
    out = resolve(claims, turns)
    # Then the claim is not stored with a text that does not name Tom
    failed = out.resolutions[-1]
    assert isinstance(failed, Unresolved)
    assert failed.detail == "the claim's text does not contain its reference as a word"


# --------------------------------------------------------------------------------------------
# Step 2: grammar
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("surface", "text"),
    [
        ("my sister", "My sister likes tea."),
        ("the user's sister", "The user's sister likes tea."),
        ("my older sister", "My older sister likes tea."),
    ],
)
def test_a_possessive_relation_is_the_entity_with_that_alias(surface: str, text: str) -> None:
    # Given a known Ana, the user's sister, and a judge that must stay silent
    judge = scripted()
    known = [entity("Ana", aliases=["my sister"]), entity("Tom", aliases=["my brother"])]
    # When a claim about the sister is resolved
    out = resolve([cand(surface, text)], {"t1": text}, known, judge)
    # Then it is Ana, by grammar, and the text names her and keeps the relation
    (only,) = resolved(out)
    assert (only.method, only.entity_id) == (ResolutionMethod.GRAMMAR, eid("Ana"))
    assert only.candidate.entity == "Ana"
    assert only.candidate.text == "Ana (the user's sister) likes tea."
    assert judge.calls == []


def test_a_kinship_word_is_a_relation() -> None:
    # Given a known Linda, the user's mother
    known = [entity("Linda", aliases=["my mother"])]
    # When "Mom" is resolved
    out = resolve([cand("Mom", "Mom likes tea.")], {"t1": "Mom likes tea."}, known)
    # Then it is Linda
    (only,) = resolved(out)
    assert (only.method, only.entity_id) == (ResolutionMethod.GRAMMAR, eid("Linda"))
    assert only.candidate.text == "Linda (the user's mother) likes tea."


def test_a_relation_with_a_name_creates_the_entity_with_the_relation_alias() -> None:
    # Given "My sister Ana works at Google." (the rules give user|sister|Ana and Ana|works_at)
    turns = {"t1": "My sister Ana works at Google."}
    claims = rules(turns["t1"])
    # When the batch is resolved
    out = resolve(claims, turns)
    # Then the relation claim is the user's, and Ana is a person called "my sister"
    relation, job = resolved(out)
    assert (relation.method, relation.candidate.entity) == (ResolutionMethod.SELF, "user")
    assert job.entity_id == eid("Ana")
    ana = upserted(out, "Ana")
    assert (ana.kind, ana.aliases, ana.entity_id) == (EntityKind.PERSON, ("my sister",), eid("Ana"))
    # And in a later batch "my sister" is Ana
    later = resolve(
        [cand("my sister", "My sister likes tea.", "t9")], {"t9": "My sister likes tea."}, [ana]
    )
    assert resolved(later)[0].entity_id == eid("Ana")


def test_a_pet_relation_makes_a_pet_that_he_and_she_can_mean() -> None:
    # Given "My dog Rex loves walks." then "He is five."
    turns = {"t1": "My dog Rex loves walks.", "t2": "He is five."}
    claims = [*rules(turns["t1"]), cand("He", "He is five.", "t2", attribute="age", value="five")]
    # When the batch is resolved
    out = resolve(claims, turns)
    # Then Rex is a pet and "He" is Rex
    assert upserted(out, "Rex").kind is EntityKind.PET
    assert resolved(out)[-1].entity_id == eid("Rex")


def test_an_unnamed_relation_is_a_placeholder_until_it_is_named() -> None:
    # Given a claim about "the user's manager", with no manager known
    text = "The user's manager moved the 1:1 to Thursday."
    first = resolve(
        [cand("the user's manager", text, attribute="moved", value="1:1")], {"t1": text}
    )
    # Then a placeholder entity stands for the manager, by grammar
    (placeholder_claim,) = resolved(first)
    assert placeholder_claim.method is ResolutionMethod.GRAMMAR
    placeholder = upserted(first, "the user's manager")
    assert placeholder.aliases == ("my manager",)
    # When a later batch names the manager, and a third one says "my manager"
    named = resolve(rules("My manager is Raj Patel.", "t2"), {"t2": "My manager is Raj Patel."})
    raj = upserted(named, "Raj Patel")
    third = resolve(
        [cand("my manager", "My manager likes tea.", "t3")],
        {"t3": "My manager likes tea."},
        [raj, placeholder],
    )
    # Then the named manager wins over the placeholder
    assert resolved(third)[0].entity_id == eid("Raj Patel")


def test_two_entities_with_one_relation_alias_are_ambiguous() -> None:
    # Given two friends, each called "my friend"
    known = [entity("Maya", aliases=["my friend"]), entity("Leo", aliases=["my friend"])]
    judge = scripted(decide(("R1", "unresolved")))
    # When "my friend" is resolved
    out = resolve([cand("my friend", "My friend likes tea.")], {"t1": "..."}, known, judge)
    # Then the judge was asked, with both, and may not create a new entity
    (reference,) = judge.references
    assert '"kind": "relation"' in reference
    assert '"may_be_new": false' in reference
    (failed,) = out.resolutions
    assert isinstance(failed, Unresolved)
    assert failed.detail == "the LLM judge could not tell which entity is meant"


# --------------------------------------------------------------------------------------------
# Step 3: exact and fuzzy alias match
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("surface", "known_name", "known_aliases"),
    [
        ("Priya", "Priya", ()),
        ("PRIYA", "Priya", ()),
        ("Pri", "Priya Sharma", ("Pri",)),
        ("Patel", "Mr. Patel", ()),
    ],
)
def test_an_exact_name_or_alias_is_the_entity(
    surface: str, known_name: str, known_aliases: tuple[str, ...]
) -> None:
    # Given a known entity carrying the name or alias (case and titles aside)
    judge = scripted()
    known = [entity(known_name, aliases=known_aliases), entity("Tom")]
    # When a claim names it
    out = resolve([cand(surface, f"{surface} likes tea.")], {"t1": "..."}, known, judge)
    # Then it is that entity, by alias, without the judge
    (only,) = resolved(out)
    assert (only.method, only.entity_id) == (ResolutionMethod.ALIAS, eid(known_name))
    assert only.candidate.entity == known_name
    assert judge.calls == []


@pytest.mark.parametrize(
    ("surface", "known_name"),
    [
        ("Pri", "Priya"),  # a short nickname: WRatio 90, begins the name
        ("Priya", "Priya Sharma"),  # a subset of the words
        ("Mr. Patel", "Raj Patel"),  # a title and the surname
        ("Priya S.", "Priya Sharma"),  # an initial
    ],
)
def test_a_fuzzy_variant_is_the_entity_and_becomes_an_alias(surface: str, known_name: str) -> None:
    # Given a known entity, an unrelated one, and a judge that must stay silent
    judge = scripted()
    known = [entity(known_name), entity("Tom")]
    text = f"{surface} likes tea."
    # When a claim names it by a variant
    out = resolve([cand(surface, text)], {"t1": text}, known, judge)
    # Then it is that entity, by fuzzy match, the text names it canonically, and the variant
    # is now one of its aliases
    (only,) = resolved(out)
    assert (only.method, only.entity_id) == (ResolutionMethod.FUZZY, eid(known_name))
    assert only.candidate.text == f"{known_name} likes tea."
    assert only.new_aliases == (surface,)
    assert upserted(out, known_name).aliases == (surface,)
    assert judge.calls == []


@pytest.mark.parametrize(
    ("surface", "known_name"),
    [
        ("Priya", "Priyanka"),  # WRatio 90 but a longer prefix: likely someone else
        ("Ana", "Anna"),  # 85.7: one letter apart
        ("Mark", "Marcus"),  # 77.1
    ],
)
def test_a_near_name_is_ambiguous_and_offline_fails(surface: str, known_name: str) -> None:
    # Given a known entity with a near name, and no judge
    text = f"{surface} likes tea."
    # When a claim names the near name
    out = resolve([cand(surface, text)], {"t1": text}, [entity(known_name)], judge=None)
    # Then it is neither merged nor made new: it fails, and nothing is upserted
    (failed,) = out.resolutions
    assert isinstance(failed, Unresolved)
    assert out.upserts == ()


def test_two_entities_matching_a_variant_equally_are_ambiguous() -> None:
    # Given two Patels and "Mr. Patel"
    known = [entity("Raj Patel", aliases=["my manager"]), entity("Nina Patel")]
    judge = scripted(decide(("R1", "E2")))
    text = "Mr. Patel approved the user's leave."
    # When it is resolved
    out = resolve([cand("Mr. Patel", text, value="leave")], {"t1": text}, known, judge)
    # Then the judge chose, and the variant became the chosen entity's alias
    (only,) = resolved(out)
    assert (only.method, only.entity_id) == (ResolutionMethod.LLM, eid("Nina Patel"))
    assert only.new_aliases == ("Mr. Patel",)


def test_a_name_never_seen_is_a_new_entity_with_a_stable_id() -> None:
    # Given known entities with unrelated names, and a judge that must stay silent
    judge = scripted()
    known = [entity("Robert"), entity("Ana", aliases=["my sister"])]
    claim = cand("Bob", "Bob lives in Porto.", attribute="lives_in", value="Porto")
    # When a claim names someone new
    out = resolve([claim], {"t1": "Bob lives in Porto."}, known, judge)
    # Then a new person entity is created with the content-addressed id of its name
    (only,) = resolved(out)
    assert (only.method, only.entity_id) == (ResolutionMethod.NEW, eid("Bob"))
    bob = upserted(out, "Bob")
    assert (bob.kind, bob.created_at, bob.last_seen) == (EntityKind.PERSON, AT, AT)
    assert judge.calls == []


def test_a_vague_reference_is_never_a_new_entity() -> None:
    # Given "the project" with nothing named in the batch
    text = "The user said the project slipped."
    claim = cand("the project", text, attribute="status", value="slipped")
    # When it is resolved
    out = resolve([claim], {"t1": text}, [entity("Inbox3", EntityKind.THING)])
    # Then it fails rather than creating an entity called "the project"
    assert isinstance(out.resolutions[0], Unresolved)
    assert out.upserts == ()


# --------------------------------------------------------------------------------------------
# Step 4: the judge
# --------------------------------------------------------------------------------------------


def test_one_judge_call_covers_every_ambiguous_reference_of_the_batch() -> None:
    # Given two claims about "Priya" (near a known Priyanka) and an ambiguous pronoun
    known = [entity("Priyanka")]
    turns = {"t1": "Priya likes tea and Priya hates coffee.", "t2": "Ana and Maya came. She left."}
    claims = [
        cand("Priya", "Priya likes tea."),
        cand("Priya", "Priya hates coffee.", attribute="dislikes", value="coffee"),
        cand("Ana", "Ana came over.", "t2", attribute="visited", value="came over"),
        cand("Maya", "Maya came over.", "t2", attribute="visited", value="came over"),
        cand("She", "She left early.", "t2", attribute="left", value="early"),
    ]
    judge = scripted(decide(("R1", "new"), ("R2", "unresolved")))
    # When the batch is resolved
    out = resolve(claims, turns, known, judge)
    # Then there was one call with two references: one per name, one per pronoun claim
    assert len(judge.calls) == 1
    assert len(judge.references) == 2
    # And both "Priya" claims follow the one decision to the same new entity
    first, second, *_, she = out.resolutions
    assert isinstance(first, ResolvedCandidate)
    assert isinstance(second, ResolvedCandidate)
    assert first.entity_id == second.entity_id == eid("Priya")
    assert first.method is ResolutionMethod.LLM
    assert isinstance(she, Unresolved)


def test_the_judge_is_told_the_model_and_sees_the_turns() -> None:
    # Given an ambiguous name
    judge = scripted(decide(("R1", "unresolved")))
    turns = {"turn-a": "Ana came by.", "turn-b": "Anna is a nurse."}
    claim = cand("Anna", "Anna is a nurse.", "turn-b", attribute="occupation", value="nurse")
    # When it is resolved
    resolve([claim], turns, [entity("Ana")], judge)
    # Then the call names the model and shows every turn by ref, never by id
    ((system, messages, model),) = judge.calls
    assert model == MODEL
    assert "<rules>" in system
    content = messages[0]["content"]
    assert '{"ref": "T1", "text": "Ana came by."}' in content
    assert '"turn_ref": "T2"' in content
    assert "turn-a" not in content
    assert "turn-b" not in content


def test_a_malformed_answer_is_retried_once() -> None:
    # Given a judge whose first answer answers a ref nobody asked about
    judge = scripted(decide(("R9", "E1")), decide(("R1", "E1")))
    text = "Anna is a nurse."
    claim = cand("Anna", text, attribute="occupation", value="nurse")
    # When the name is resolved
    out = resolve([claim], {"t1": text}, [entity("Ana")], judge)
    # Then the second answer decides, and both calls are accounted for
    (only,) = resolved(out)
    assert only.entity_id == eid("Ana")
    assert len(judge.calls) == 2
    assert out.llm_calls == (replace(USAGE, malformed=True), USAGE)
    assert out.judge_malformed == 1


def test_an_answer_malformed_twice_fails_the_ambiguous_claims_only() -> None:
    # Given a judge that answers outside the options, then with unparseable output
    judge = scripted(decide(("R1", "E5")), MalformedLlmOutput("truncated", USAGE))
    turns = {"t1": "I live in Porto. Anna is a nurse."}
    claims = [
        cand("I", "The user lives in Porto.", attribute="lives_in", value="Porto"),
        cand("Anna", "Anna is a nurse.", attribute="occupation", value="nurse"),
    ]
    # When the batch is resolved
    out = resolve(claims, turns, [entity("Ana")], judge)
    # Then the user's claim stands, the ambiguous one fails visibly, and no third call is made
    mine, anna = out.resolutions
    assert isinstance(mine, ResolvedCandidate)
    assert isinstance(anna, Unresolved)
    assert anna.detail == "the LLM judge answer stayed malformed after a retry"
    assert len(judge.calls) == 2
    assert out.judge_malformed == 2
    assert len(out.llm_calls) == 2


def test_a_judge_that_cannot_be_reached_fails_the_batch_for_a_retry() -> None:
    # Given a judge whose API stays unavailable
    judge = scripted(LlmUnavailable("model API returned 529"))
    text = "Anna is a nurse."
    # When an ambiguous name is resolved
    # Then the transient error reaches the caller (Step Functions retries the task)
    with pytest.raises(LlmUnavailable):
        resolve([cand("Anna", text, value="nurse")], {"t1": text}, [entity("Ana")], judge)


# --------------------------------------------------------------------------------------------
# Ids, aliases, convergence
# --------------------------------------------------------------------------------------------


def test_entity_ids_are_stable_and_scoped() -> None:
    # Given one name written in different layouts
    # Then it has one id, scoped by tenant and user, and the user's own id is the "user" one
    assert eid("Priya") == eid(" priya ") == eid("PRIYA.") == eid("Priya  ")
    assert eid("Priya") != entity_id_for("other-tenant", USER, "Priya")
    assert eid("Priya") != entity_id_for(TENANT, "u-2", "Priya")
    assert eid("Priya") != eid("Priyanka")
    assert len(eid("user")) == 32


def test_redelivering_a_batch_changes_nothing() -> None:
    # Given a store that has absorbed a batch once
    store = InMemoryEntityStore()
    turns = {"t1": "My sister Ana works at Google.", "t2": "Pri likes tea."}
    claims = [*rules(turns["t1"]), cand("Pri", "Pri likes tea.", "t2")]
    save_entity(store, entity("Priya"), SOURCES)

    def run() -> BatchResolution:
        out = resolve(claims, turns, store.entities_of(TENANT, USER, 100))
        for upsert in out.upserts:
            save_entity(store, upsert, SOURCES)
        return out

    first = run()
    before = store.entities_of(TENANT, USER, 100)
    # When the same batch is delivered again
    second = run()
    # Then the claims resolve to the same entities with the same texts (the second time "Pri"
    # is a known alias rather than a fuzzy hit), and the store is unchanged
    assert [(r.candidate, r.entity_id) for r in resolved(second)] == [
        (r.candidate, r.entity_id) for r in resolved(first)
    ]
    assert store.entities_of(TENANT, USER, 100) == before


def test_aliases_accumulate_in_the_store() -> None:
    # Given an entity stored with one alias, first seen two days ago
    store = InMemoryEntityStore()
    old = entity("Priya", EntityKind.OTHER, ["Pri"], days_ago=2)
    save_entity(store, old, SOURCES)
    # When a later sighting brings another alias, a case duplicate and a known kind
    save_entity(store, entity("Priya", aliases=["my sister", "PRI", "priya"], days_ago=0), SOURCES)
    # Then aliases are unioned (first-seen order, no case duplicates, never the name itself)
    (stored,) = store.entities_of(TENANT, USER, 10)
    assert stored.aliases == ("Pri", "my sister")
    # And the first sighting is kept, the last one moves, and the kind becomes known
    assert (stored.created_at, stored.last_seen) == (old.created_at, AT)
    assert stored.kind is EntityKind.PERSON


def test_a_concurrent_writer_s_aliases_are_kept() -> None:
    # Given a store where another resolver saves "Pri" between our read and our write
    class Racing(InMemoryEntityStore):
        raced = False

        def put(
            self, entity: Entity, expected_version: int | None, source_trace_ids: Sequence[str]
        ) -> None:
            if not self.raced:
                self.raced = True
                save_entity(self, entity_with("Pri"), SOURCES)
            super().put(entity, expected_version, source_trace_ids)

    def entity_with(alias: str) -> Entity:
        return entity("Priya", aliases=[alias], days_ago=0)

    store = Racing()
    save_entity(store, entity("Priya", days_ago=2), SOURCES)
    store.raced = False
    # When we save "my sister" for the same entity
    save_entity(store, entity_with("my sister"), SOURCES)
    # Then our write was refused once, re-read, and both aliases are stored
    (stored,) = store.entities_of(TENANT, USER, 10)
    assert set(stored.aliases) == {"Pri", "my sister"}


def test_merging_is_order_insensitive() -> None:
    # Given two sightings of one entity
    a = entity("Priya", EntityKind.OTHER, ["Pri"], days_ago=3)
    b = entity("Priya", EntityKind.PERSON, ["Pri", "my sister"], days_ago=1)
    # Then merging either way gives the same alias set, dates and kind
    ab, ba = merge_entities(a, b), merge_entities(b, a)
    assert set(ab.aliases) == set(ba.aliases)
    assert (ab.created_at, ab.last_seen, ab.kind) == (ba.created_at, ba.last_seen, ba.kind)
    # And two different entities never merge
    with pytest.raises(ValueError, match="cannot merge"):
        merge_entities(a, entity("Ana"))


def test_the_store_lists_a_users_entities_most_recent_first() -> None:
    # Given entities of two users, seen on different days
    store = InMemoryEntityStore()
    for name, days in (("Old", 9), ("Newest", 0), ("Middle", 4)):
        save_entity(store, entity(name, days_ago=days), SOURCES)
    save_entity(
        store, Entity.create(TENANT, "u-2", "Stranger", kind=EntityKind.PERSON, at=AT), SOURCES
    )
    # When the first user's two most recent are asked for
    # Then they come newest first, and the other user's are never listed
    assert [e.name for e in store.entities_of(TENANT, USER, 2)] == ["Newest", "Middle"]


def test_two_batches_converge_on_one_entity_for_priya_and_pri() -> None:
    # Given a store, and a first batch that names Priya
    store = InMemoryEntityStore()

    def run(candidate: Candidate, turn_text: str) -> ResolvedCandidate:
        known = store.entities_of(TENANT, USER, 100)
        out = resolve([candidate], {candidate.source_turn_id or "": turn_text}, known)
        for upsert in out.upserts:
            save_entity(store, upsert, SOURCES)
        (only,) = resolved(out)
        return only

    first = run(cand("Priya", "Priya likes tea.", "t1"), "Priya likes tea.")
    # When a later batch calls her "Pri", and a third one "Pri" again
    second = run(cand("Pri", "Pri hates coffee.", "t2", value="coffee"), "Pri hates coffee.")
    third = run(cand("Pri", "Pri plays chess.", "t3", value="chess"), "Pri plays chess.")
    # Then all three are one entity: new, then fuzzy (learning the alias), then by alias
    assert first.entity_id == second.entity_id == third.entity_id == eid("Priya")
    assert [r.method for r in (first, second, third)] == [
        ResolutionMethod.NEW,
        ResolutionMethod.FUZZY,
        ResolutionMethod.ALIAS,
    ]
    assert second.candidate.text == "Priya hates coffee."
    (stored,) = store.entities_of(TENANT, USER, 10)
    assert stored.aliases == ("Pri",)


def test_resolutions_keep_the_input_order() -> None:
    # Given claims listed out of turn order
    turns = {"t1": "Ana likes tea.", "t2": "Tom likes tea."}
    claims = [cand("Tom", "Tom likes tea.", "t2"), cand("Ana", "Ana likes tea.", "t1")]
    # When they are resolved
    out = resolve(claims, turns)
    # Then the resolutions line up with the input
    assert [r.candidate.entity for r in out.resolutions] == ["Tom", "Ana"]


def test_an_erased_request_s_claims_write_no_entity_and_the_rest_of_the_batch_goes_on() -> None:
    # Given a batch of two requests of one session: the first one's user was erased while it
    # was in flight (its trace is gone), the second came later (its trace is recorded)
    ledger = InMemoryTurnLedger()
    ledger.put_trace(TraceRecord("trace-2", TENANT, USER, "s1", None, "user_explicit", "", ()))
    store, log, spans = InMemoryEntityStore(ledger), InMemorySessionLog(), InMemorySpanStore()
    texts = {"t1": "My sister Ana lives in Lisbon.", "t2": "Priya likes tea."}
    traces = {"t1": "trace-1", "t2": "trace-2"}
    for turn_id, text in texts.items():
        turn = QueuedTurn(
            tenant=TENANT,
            user_id=USER,
            session_id="s1",
            agent_id=None,
            trace_id=traces[turn_id],
            turn_id=turn_id,
            role=Role.USER,
            text=text,
            observed_at=AT,
            source=Source.USER_EXPLICIT,
        )
        log.append_batch([turn], now=AT.timestamp(), retention_secs=3_600)
    erased_claims = rules(texts["t1"], "t1")
    payload = ExtractOutput(
        tenant=TENANT,
        user_id=USER,
        session_id="s1",
        source="user_explicit",
        turns=[
            ExtractedTurn(turn_id=t, trace_id=traces[t], observed_at=AT, extractor=Extractor.RULES)
            for t in texts
        ],
        candidates=[*erased_claims, cand("Priya", texts["t2"], "t2")],
    )
    metrics = CountingMetrics()
    deps = ResolveDeps(store, log, spans, metrics, clock=AT.timestamp)
    # When resolve_refs runs
    out = resolve_stage.run(payload, PipelineConfig(), deps)
    # Then nothing of the erased request reaches the entities, and its claims go no further
    stored = store.entities_of(TENANT, USER, 10)
    assert "Ana" not in {e.name for e in stored} and "Priya" in {e.name for e in stored}
    assert all("sister" not in alias for e in stored for alias in e.aliases)
    assert [item.turn_id for item in out.items] == ["t2"]
    # And each of its claims is rejected as UserErased, visibly (span and metric)
    rejected = spans.spans_of(TENANT, "trace-1")
    assert [s.reason for s in rejected] == [UserErased()] * len(erased_claims)
    assert metrics.counts[("resolve_refs", "reject", "UserErased")] == len(erased_claims)
