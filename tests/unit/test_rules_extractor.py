"""The rule fast-path: which simple claims it extracts, and when it admits it did not understand."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memwrite.claims.candidate import Candidate, MemoryType
from memwrite.extract.rules import RuleExtraction, extract_with_rules

Triple = tuple[str, str, str, bool]
"""(entity, attribute, value, negated)"""

NO_CLAIM: frozenset[Triple] = frozenset()


def _user(attribute: str, value: str, *, negated: bool = False) -> Triple:
    return ("user", attribute, value, negated)


def _triples(result: RuleExtraction) -> frozenset[Triple]:
    return frozenset((c.entity, c.attribute, c.value, c.negated) for c in result.candidates)


# Plain statements: every candidate must be an explicit, kept claim with exactly these triples.
CLAIMS: list[tuple[str, frozenset[Triple]]] = [
    # identity
    ("I'm Marcus.", frozenset({_user("name", "Marcus")})),
    ("my name is Marcus Rivera", frozenset({_user("name", "Marcus Rivera")})),
    ("My name's Priya.", frozenset({_user("name", "Priya")})),
    ("Call me Mo.", frozenset({_user("name", "Mo")})),
    ("You can call me Mo, everyone does.", frozenset({_user("name", "Mo")})),
    ("i go by alex", frozenset({_user("name", "alex")})),
    ("I'm Marcus, by the way. Marcus Rivera.", frozenset({_user("name", "Marcus Rivera")})),
    (
        "Honestly nothing specific right now. Just curious. I'm Marcus, by the way. Marcus Rivera.",
        frozenset({_user("name", "Marcus Rivera")}),
    ),
    ("I'm 41 years old.", frozenset({_user("age", "41")})),
    ("I just turned 30!", frozenset({_user("age", "30")})),
    # occupation and employer
    ("I'm a nurse.", frozenset({_user("occupation", "nurse")})),
    ("I am an architect.", frozenset({_user("occupation", "architect")})),
    ("I work as a data engineer.", frozenset({_user("occupation", "data engineer")})),
    ("I work at Google.", frozenset({_user("works_at", "Google")})),
    ("I work for Acme Corp.", frozenset({_user("works_at", "Acme Corp")})),
    ("I work at AT&T.", frozenset({_user("works_at", "AT&T")})),
    (
        "I'm a teacher at Lincoln High.",
        frozenset({_user("occupation", "teacher"), _user("works_at", "Lincoln High")}),
    ),
    (
        "I work at Google as a senior data engineer.",
        frozenset({_user("works_at", "Google"), _user("occupation", "senior data engineer")}),
    ),
    (
        "I'm a student at MIT.",
        frozenset({_user("occupation", "student"), _user("studies_at", "MIT")}),
    ),
    (
        "I've been an architect at this firm in Manhattan for 12 years.",
        frozenset({_user("occupation", "architect")}),
    ),
    ("I'm retired now.", frozenset({_user("employment_status", "retired")})),
    # where the user lives
    ("I live in Berlin.", frozenset({_user("lives_in", "Berlin")})),
    ("I moved to Lisbon last year.", frozenset({_user("lives_in", "Lisbon")})),
    ("I'm based in Austin.", frozenset({_user("lives_in", "Austin")})),
    ("I just relocated to Denver!", frozenset({_user("lives_in", "Denver")})),
    ("I live in New York City with my wife.", frozenset({_user("lives_in", "New York City")})),
    ("I live in Austin, Texas.", frozenset({_user("lives_in", "Austin, Texas")})),
    (
        "I live in Berlin, Germany, with my wife.",
        frozenset({_user("lives_in", "Berlin, Germany")}),
    ),
    ("I moved to St. Louis.", frozenset({_user("lives_in", "St. Louis")})),
    ("We moved to Austin.", frozenset({_user("lives_in", "Austin")})),
    (
        "We live in New York and it's diverse, sure, but our neighborhood skews pretty white.",
        frozenset({_user("lives_in", "New York")}),
    ),
    (
        "I moved from Boston to Denver.",
        frozenset({_user("lives_in", "Denver"), _user("lives_in", "Boston", negated=True)}),
    ),
    ("I grew up in Ohio.", frozenset({_user("hometown", "Ohio")})),
    ("I'm originally from Chicago.", frozenset({_user("hometown", "Chicago")})),
    ("i live in berlin", frozenset({_user("lives_in", "berlin")})),
    ("I LIVE IN BERLIN", frozenset({_user("lives_in", "BERLIN")})),
    # likes, dislikes, preferences, tools
    ("I love hiking.", frozenset({_user("likes", "hiking")})),
    ("I LOVE SUSHI!!!", frozenset({_user("likes", "SUSHI")})),
    ("I hate cilantro.", frozenset({_user("dislikes", "cilantro")})),
    ("I prefer tea over coffee.", frozenset({_user("prefers", "tea")})),
    ("I prefer to work from home.", frozenset({_user("prefers", "work from home")})),
    ("I use Neovim.", frozenset({_user("uses", "Neovim")})),
    ("I'm a big fan of jazz.", frozenset({_user("likes", "jazz")})),
    (
        "I love hiking, biking, and swimming.",
        frozenset({_user("likes", "hiking"), _user("likes", "biking"), _user("likes", "swimming")}),
    ),
    ("I don't like cilantro.", frozenset({_user("dislikes", "cilantro")})),
    ("I can't stand reality TV.", frozenset({_user("dislikes", "reality TV")})),
    ("I'm not a fan of horror movies.", frozenset({_user("dislikes", "horror movies")})),
    ("I love my smart home setup.", frozenset({_user("likes", "smart home setup")})),
    ("I love 99% Invisible.", frozenset({_user("likes", "99% Invisible")})),
    (
        "I'm using WUFI Passive for the modeling and it's incredibly detailed.",
        frozenset({_user("uses", "WUFI Passive")}),
    ),
    ("My favorite color is blue.", frozenset({_user("favorite_color", "blue")})),
    # relations
    ("My sister Ana is visiting.", frozenset({_user("sister", "Ana")})),
    ("My wife's name is Elena.", frozenset({_user("wife", "Elena")})),
    (
        "My son Mateo is 14.",
        frozenset({_user("son", "Mateo"), ("Mateo", "age", "14", False)}),
    ),
    ("My manager is Priya.", frozenset({_user("manager", "Priya")})),
    (
        "Yeah, he's 14. My daughter Sofia is 9. They're great kids.",
        frozenset({_user("daughter", "Sofia"), ("Sofia", "age", "9", False)}),
    ),
    ("My sister Rosa called after I told mom.", frozenset({_user("sister", "Rosa")})),
    ("My buddy Rob works in structural engineering.", frozenset({_user("friend", "Rob")})),
    ("My dog is called Max.", frozenset({_user("dog", "Max")})),
    (
        "My older brother Tom works at Tesla.",
        frozenset({_user("brother", "Tom"), ("Tom", "works_at", "Tesla", False)}),
    ),
    ("I'm married to Elena.", frozenset({_user("spouse", "Elena")})),
    (
        "My ex-wife Sarah lives in Boston.",
        frozenset({_user("ex_wife", "Sarah"), ("Sarah", "lives_in", "Boston", False)}),
    ),
    # allergies and diet
    ("I'm allergic to peanuts.", frozenset({_user("allergic_to", "peanuts")})),
    ("I'm allergic to cats...", frozenset({_user("allergic_to", "cats")})),
    ("I’m allergic to peanuts.", frozenset({_user("allergic_to", "peanuts")})),
    (
        "I'm severely allergic to shellfish and penicillin.",
        frozenset({_user("allergic_to", "shellfish"), _user("allergic_to", "penicillin")}),
    ),
    ("I have a peanut allergy.", frozenset({_user("allergic_to", "peanut")})),
    ("I'm vegan.", frozenset({_user("diet", "vegan")})),
    ("I'm a vegetarian.", frozenset({_user("diet", "vegetarian")})),
    ("I'm on a keto diet.", frozenset({_user("diet", "keto")})),
    ("I've decided to go fully vegan.", frozenset({_user("diet", "vegan")})),
    ("I don't eat meat.", frozenset({_user("does_not_eat", "meat")})),
    ("I'm lactose intolerant.", frozenset({_user("intolerant_to", "lactose")})),
    ("Please remember that I'm vegetarian.", frozenset({_user("diet", "vegetarian")})),
    # standing instructions
    ("From now on answer in Spanish.", frozenset({_user("instruction", "answer in Spanish")})),
    ("Always use metric units.", frozenset({_user("instruction", "always use metric units")})),
    ("never mention my ex", frozenset({_user("instruction", "never mention the user's ex")})),
    ("Please stop using emojis.", frozenset({_user("instruction", "stop using emojis")})),
    (
        "Can you always reply in English from now on?",
        frozenset({_user("instruction", "always reply in English")}),
    ),
    ("From now on, call me Mo.", frozenset({_user("name", "Mo")})),
    # retractions keep the triple and set negated
    ("I don't live in Berlin anymore.", frozenset({_user("lives_in", "Berlin", negated=True)})),
    ("I no longer work at Google.", frozenset({_user("works_at", "Google", negated=True)})),
    ("I'm not vegan anymore.", frozenset({_user("diet", "vegan", negated=True)})),
    ("I'm no longer a nurse.", frozenset({_user("occupation", "nurse", negated=True)})),
    ("I'm a former nurse.", frozenset({_user("occupation", "nurse", negated=True)})),
    ("I moved out of Berlin.", frozenset({_user("lives_in", "Berlin", negated=True)})),
    ("I quit my job at Google.", frozenset({_user("works_at", "Google", negated=True)})),
    ("I don't use Vim anymore.", frozenset({_user("uses", "Vim", negated=True)})),
    ("I don’t live in Berlin anymore.", frozenset({_user("lives_in", "Berlin", negated=True)})),
    (
        "My favorite food is no longer sushi.",
        frozenset({_user("favorite_food", "sushi", negated=True)}),
    ),
    (
        "Priya doesn't live in Lisbon anymore.",
        frozenset({("Priya", "lives_in", "Lisbon", True)}),
    ),
    # third person: named people become the entity
    ("Priya lives in Lisbon.", frozenset({("Priya", "lives_in", "Lisbon", False)})),
    ("Priya is a nurse.", frozenset({("Priya", "occupation", "nurse", False)})),
    ("Diana's a marketer.", frozenset({("Diana", "occupation", "marketer", False)})),
    ("My brother works at Tesla.", NO_CLAIM),
    # compound sentences
    (
        "I live in Berlin and I work at SAP.",
        frozenset({_user("lives_in", "Berlin"), _user("works_at", "SAP")}),
    ),
    (
        "I live in Berlin and work at SAP.",
        frozenset({_user("lives_in", "Berlin"), _user("works_at", "SAP")}),
    ),
    (
        "Priya works at Google and lives in Lisbon.",
        frozenset({("Priya", "works_at", "Google", False), ("Priya", "lives_in", "Lisbon", False)}),
    ),
    (
        "I'm vegan and allergic to nuts.",
        frozenset({_user("diet", "vegan"), _user("allergic_to", "nuts")}),
    ),
    (
        "I'm Marcus and I live in Berlin.",
        frozenset({_user("name", "Marcus"), _user("lives_in", "Berlin")}),
    ),
    (
        "I'm a nurse, but I hate hospitals.",
        frozenset({_user("occupation", "nurse"), _user("dislikes", "hospitals")}),
    ),
    (
        "So I'm 41 and I had this moment on the train today.",
        frozenset({_user("age", "41")}),
    ),
    (
        "I'm an architect and I can't fix a toilet.",
        frozenset({_user("occupation", "architect")}),
    ),
    # questions, pleasantries and look-alikes carry no claim
    ("Do I live in Berlin?", NO_CLAIM),
    ("Where should I live?", NO_CLAIM),
    ("What's the best way to clean a cast iron skillet? I keep ruining mine.", NO_CLAIM),
    ("Is Bitwarden free?", NO_CLAIM),
    ("Thanks, that was helpful.", NO_CLAIM),
    ("Haha good morning!", NO_CLAIM),
    ("I love that!", NO_CLAIM),
    ("I'm looking at something online.", NO_CLAIM),
    ("Never mind about the timer, I'll deal with it.", NO_CLAIM),
    ("Spoken like a real architect.", NO_CLAIM),
    ("She said 'well, welcome home. I'm Elena.' Nice woman.", NO_CLAIM),
    ("I'm Italian.", NO_CLAIM),
    ("I'm from IT.", NO_CLAIM),
    ('Mateo said: "Dad, I like Austin."', NO_CLAIM),
    ("I'm a terrible cook.", NO_CLAIM),
    ("Never give up.", NO_CLAIM),
    ("I live in fear of spiders.", NO_CLAIM),
    ("I work at a startup.", NO_CLAIM),
    ("I still love my wife.", NO_CLAIM),
    ("We're moving to Austin.", NO_CLAIM),
]

# Hypotheticals, role-play and sarcasm: whatever is emitted is downgraded and discarded.
GUARDED: list[tuple[str, frozenset[Triple]]] = [
    (
        "If I lived in Paris I'd eat croissants every day.",
        frozenset({_user("lives_in", "Paris")}),
    ),
    ("Imagine I'm a pilot.", frozenset({_user("occupation", "pilot")})),
    ("I wish I lived in Rome.", frozenset({_user("lives_in", "Rome")})),
    ("Suppose I worked at NASA.", frozenset({_user("works_at", "NASA")})),
    ("If I were a doctor, I'd help people.", frozenset({_user("occupation", "doctor")})),
    ("What if I moved to Denver?", frozenset({_user("lives_in", "Denver")})),
    ("Hypothetically, I'm vegan.", frozenset({_user("diet", "vegan")})),
    ("I'm basically a chef.", frozenset({_user("occupation", "chef")})),
    ("Pretend you're a pirate.", NO_CLAIM),
    (
        "Let's role-play: I'm a pilot and you're air traffic control.",
        frozenset({_user("occupation", "pilot")}),
    ),
    ("Oh great, I just love Mondays /s", frozenset({_user("likes", "Mondays")})),
    ("I love Mondays. Yeah right.", frozenset({_user("likes", "Mondays")})),
]


@pytest.mark.parametrize(("text", "expected"), CLAIMS, ids=[t for t, _ in CLAIMS])
def test_plain_statements_yield_exactly_their_triples(
    text: str, expected: frozenset[Triple]
) -> None:
    # Given a plain user statement
    # When the rules read it
    result = extract_with_rules(text)
    # Then exactly the expected triples come out, as explicit, kept, grounded claims
    assert _triples(result) == expected
    for c in result.candidates:
        assert c.confidence == pytest.approx(0.9)
        assert c.quality.verdict == "keep"
        assert c.grounded is True


@pytest.mark.parametrize(("text", "expected"), GUARDED, ids=[t for t, _ in GUARDED])
def test_hypotheticals_are_downgraded_and_discarded(text: str, expected: frozenset[Triple]) -> None:
    # Given a hypothetical, role-play or sarcastic statement
    # When the rules read it
    result = extract_with_rules(text)
    # Then any claim is kept for audit only: confidence <= 0.3 and a discard verdict
    assert _triples(result) == expected
    for c in result.candidates:
        assert c.confidence <= 0.3
        assert c.quality.verdict == "discard"
        assert c.quality.reason in {"hypothetical", "role_play", "sarcasm"}
    # And the guard counts as understanding the turn
    assert result.fully_covered is True


def test_the_table_is_large_enough() -> None:
    # Given the two parametrised tables
    rows = len(CLAIMS) + len(GUARDED)
    # When they are counted
    # Then they hold at least 80 sentences
    assert rows >= 80


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("I'm basically a chef.", "hypothetical"),
        ("Let's role-play: I'm a pilot.", "role_play"),
        ("Oh great, I just love Mondays /s", "sarcasm"),
    ],
)
def test_the_discard_reason_names_the_guard(text: str, reason: str) -> None:
    # Given a guarded statement of each kind
    # When the rules read it
    (candidate,) = extract_with_rules(text).candidates
    # Then the discard reason says which guard applied
    assert candidate.quality.reason == reason


def test_a_hedged_claim_is_kept_with_lower_confidence() -> None:
    # Given a claim behind "I think"
    # When the rules read it
    (candidate,) = extract_with_rules("I think I'm allergic to cats.").candidates
    # Then it is kept, but with less confidence than a plain statement
    assert candidate.value == "cats"
    assert candidate.confidence == pytest.approx(0.6)
    assert candidate.quality.verdict == "keep"


def test_a_candidate_carries_text_type_topic_scores_and_questions() -> None:
    # Given a plain statement of where the user lives
    # When the rules read it
    (candidate,) = extract_with_rules("I live in Berlin.", source_turn_id="turn-7").candidates
    # Then the candidate is a complete, self-contained fact
    assert candidate.text == "The user lives in Berlin."
    assert candidate.type is MemoryType.FACT
    assert candidate.topic == "location"
    assert candidate.predicate_is_stateful is True
    assert 0.8 <= candidate.importance <= 0.9
    assert candidate.valid_at is None
    assert candidate.source_turn_id == "turn-7"
    assert len(candidate.search_questions) == 3
    assert "Where does the user live?" in candidate.search_questions


@pytest.mark.parametrize(
    ("text", "attribute", "stateful", "memory_type"),
    [
        ("I live in Berlin.", "lives_in", True, MemoryType.FACT),
        ("I work at SAP.", "works_at", True, MemoryType.FACT),
        ("My name is Ana.", "name", True, MemoryType.FACT),
        ("I'm vegan.", "diet", True, MemoryType.PREFERENCE),
        ("I prefer tea.", "prefers", True, MemoryType.PREFERENCE),
        ("My wife is Elena.", "wife", True, MemoryType.FACT),
        ("I love jazz.", "likes", False, MemoryType.PREFERENCE),
        ("I hate jazz.", "dislikes", False, MemoryType.PREFERENCE),
        ("I use Vim.", "uses", False, MemoryType.PREFERENCE),
        ("I'm allergic to nuts.", "allergic_to", False, MemoryType.FACT),
        ("My sister is Ana.", "sister", False, MemoryType.FACT),
        ("Always use metric units.", "instruction", False, MemoryType.INSTRUCTION),
    ],
)
def test_statefulness_and_type_follow_the_predicate(
    text: str, attribute: str, stateful: bool, memory_type: MemoryType
) -> None:
    # Given a statement with a known predicate
    # When the rules read it
    (candidate,) = extract_with_rules(text).candidates
    # Then a replacing predicate is stateful and an accumulating one is not
    assert candidate.attribute == attribute
    assert candidate.predicate_is_stateful is stateful
    assert candidate.type is memory_type


def test_importance_ranks_identity_above_taste() -> None:
    # Given an allergy, a relation and a liking
    allergy = extract_with_rules("I'm allergic to peanuts.").candidates[0]
    sister = extract_with_rules("My sister is Ana.").candidates[0]
    liking = extract_with_rules("I love hiking.").candidates[0]
    # When their importance is compared
    # Then what keeps the user safe or identifies them outranks what they enjoy
    assert allergy.importance >= 0.8
    assert sister.importance >= 0.8
    assert liking.importance == pytest.approx(0.5)


def test_a_retraction_keeps_high_confidence_and_says_no_longer() -> None:
    # Given a retraction
    # When the rules read it
    (candidate,) = extract_with_rules("I don't live in Berlin anymore.").candidates
    # Then the triple is negated, still confident, and the text reads as a retraction
    assert candidate.negated is True
    assert candidate.confidence == pytest.approx(0.9)
    assert candidate.text == "The user no longer lives in Berlin."


def test_a_relative_named_in_a_claim_is_the_entity() -> None:
    # Given a claim about a named brother
    # When the rules read it
    result = extract_with_rules("My brother Tom works at Tesla.")
    # Then the job claim is about Tom, and its text names him and the relation
    (job,) = [c for c in result.candidates if c.attribute == "works_at"]
    assert job.entity == "Tom"
    assert job.text == "Tom, the user's brother, works at Tesla."


# --------------------------------------------------------------------------------------------
# Coverage
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "",
        "I live in Berlin and I work at SAP.",
        "I'm Marcus, by the way. Marcus Rivera.",
        "Thanks, that was helpful.",
        "Do you like Berlin? Where should a tourist go?",
        "Pretend you're a pirate.",
        "If I lived in Paris, I would eat croissants every single day.",
        "Haha, thank you so much for that. I'm vegan btw.",
        "I live in Berlin now.",
    ],
)
def test_fully_covered_when_every_clause_is_understood(text: str) -> None:
    # Given a turn made only of recognised claims, questions, pleasantries or guarded clauses
    # When the rules read it
    result = extract_with_rules(text)
    # Then nothing is left for the LLM
    assert result.fully_covered is True


@pytest.mark.parametrize(
    "text",
    [
        "My brother works at Tesla.",
        "So I've been thinking about something on my commute today.",
        "I work at Google on the search infrastructure team.",
        "My sister Rosa called after I told mom.",
        "I live in Berlin. Priya said the Inbox3 deadline is Friday.",
        "I've been an architect at this firm in Manhattan for 12 years.",
        "I work at a startup.",
        "She said 'well, welcome home. I'm Elena.' Nice woman.",
        "I don't live in Berlin anymore and work at SAP.",
        # a question about the speaker's own life tells of it
        "Where do I even buy that in Austin?",
        "How do we get our deposit back from the landlord?",
    ],
)
def test_not_covered_when_a_clause_may_hold_knowledge_the_rules_missed(text: str) -> None:
    # Given a turn with a clause the rules cannot fully explain
    # When the rules read it
    result = extract_with_rules(text)
    # Then the caller is told to run the LLM (or defer the turn offline)
    assert result.fully_covered is False


# Compound sentences: every clause and every conjunct is either read or small talk.

# "but ..." with the subject "I" left out: read with the subject of the claim before it.
ELIDED_SUBJECT: list[tuple[str, frozenset[Triple]]] = [
    (
        "I adore ramen but can't stand cilantro.",
        frozenset({_user("likes", "ramen"), _user("dislikes", "cilantro")}),
    ),
    (
        "I'm vegetarian but love halloumi",
        frozenset({_user("diet", "vegetarian"), _user("likes", "halloumi")}),
    ),
    (
        "I grew up in Cork but live in Dublin now.",
        frozenset({_user("hometown", "Cork"), _user("lives_in", "Dublin")}),
    ),
    (
        "I'm a nurse, but also a painter.",
        frozenset({_user("occupation", "nurse"), _user("occupation", "painter")}),
    ),
    (
        "I moved to Leeds and work at Unilever.",
        frozenset({_user("lives_in", "Leeds"), _user("works_at", "Unilever")}),
    ),
]


@pytest.mark.parametrize(("text", "expected"), ELIDED_SUBJECT, ids=[t for t, _ in ELIDED_SUBJECT])
def test_a_conjunct_without_a_subject_is_read_with_the_users(
    text: str, expected: frozenset[Triple]
) -> None:
    # Given a claim about "I" joined to a verb phrase whose subject is left out
    # When the rules read it
    result = extract_with_rules(text)
    # Then both are claims about the user, and the turn is read whole
    assert _triples(result) == expected
    assert result.fully_covered is True


def test_a_carried_subject_keeps_the_hedge_of_its_sentence() -> None:
    # Given a hedged claim and a conjunct that shares its subject
    result = extract_with_rules("I think I like oolong but prefer sencha.")
    # Then neither claim is read as a plain statement
    assert {c.value for c in result.candidates} == {"oolong", "sencha"}
    assert all(c.confidence < 0.9 for c in result.candidates)


# A conjunct (or a short clause) with words of knowledge no rule reads: never fully covered,
# and never a memory of the part that was not read.
UNREAD_CONJUNCTS: list[tuple[str, frozenset[Triple]]] = [
    # a new subject after "but": cilantro is not the user
    ("I adore ramen, but cilantro is vile.", frozenset({_user("likes", "ramen")})),
    # the verb agrees with someone else: not "I"
    ("I adore ramen but hates cilantro", frozenset({_user("likes", "ramen")})),
    ("I adore ramen but my husband hates it", frozenset({_user("likes", "ramen")})),
    # a verb phrase no rule reads
    ("I live in Dublin but travel a lot", frozenset({_user("lives_in", "Dublin")})),
    ("I live in Dublin yet miss Cork.", frozenset({_user("lives_in", "Dublin")})),
    ("I work at Unilever or at least I did", frozenset({_user("works_at", "Unilever")})),
    ("I work at Unilever then go climbing.", frozenset({_user("works_at", "Unilever")})),
    # words beside the claim that it does not hold
    ("I live in Dublin with my husband", frozenset({_user("lives_in", "Dublin")})),
    # after a retraction the negation's scope is unclear: nothing carries
    (
        "I don't live in Cork anymore but work at Unilever",
        frozenset({_user("lives_in", "Cork", negated=True)}),
    ),
    # another subject never carries: the rules can't name "my brother"
    ("My brother lives in Cork but loves jazz", NO_CLAIM),
    # short clauses of knowledge, in sentences of their own
    ("I'm a nurse. Slept badly. Night shift again.", frozenset({_user("occupation", "nurse")})),
    ("Physio on Monday. Knee still sore.", NO_CLAIM),
    ("It's Ottolenghi!", NO_CLAIM),
]


@pytest.mark.parametrize(
    ("text", "expected"), UNREAD_CONJUNCTS, ids=[t for t, _ in UNREAD_CONJUNCTS]
)
def test_a_conjunct_the_rules_cannot_read_leaves_the_turn_not_fully_covered(
    text: str, expected: frozenset[Triple]
) -> None:
    # Given a turn with a clause or conjunct that no rule reads
    # When the rules read it
    result = extract_with_rules(text)
    # Then only what they did read is a candidate, and the turn is not reported as understood
    assert _triples(result) == expected
    assert result.fully_covered is False


_CLAIMS_BEFORE = st.sampled_from(
    ["I live in Dublin", "I work at Unilever", "I'm a nurse", "I'm 41", "My name is Ada"]
)
_JOINS = st.sampled_from([" but", " and", " or", ", but", ", and", ", or", " so", " yet", " then"])
# Made-up lowercase words: in no rule's vocabulary and no list of small talk.
_UNKNOWN_WORD = st.text(alphabet="bdfgkmpvz", min_size=2, max_size=3).map(lambda s: f"{s}orb")


@given(claim=_CLAIMS_BEFORE, join=_JOINS, words=st.lists(_UNKNOWN_WORD, min_size=1, max_size=3))
def test_words_after_a_conjunction_are_never_dropped_silently(
    claim: str, join: str, words: list[str]
) -> None:
    # Given a claim the rules read, then a conjunction and words they do not know
    text = f"{claim}{join} {' '.join(words)}."
    # When the rules read it
    result = extract_with_rules(text)
    # Then the turn is not fully covered, and no value holds the unknown words
    assert result.fully_covered is False
    assert not any(w in c.value for c in result.candidates for w in words)


# Conjuncts and clauses of small talk carry nothing: the turn is read whole.
SMALL_TALK: list[tuple[str, frozenset[Triple]]] = [
    ("I live in Dublin, and that's it.", frozenset({_user("lives_in", "Dublin")})),
    ("I'm a nurse, but whatever.", frozenset({_user("occupation", "nurse")})),
    ("I work at Unilever now, you know", frozenset({_user("works_at", "Unilever")})),
    ("Wow, Priya, that's gorgeous! I'm a painter.", frozenset({_user("occupation", "painter")})),
    ("Thanks, Sam! Can't wait to see you!", NO_CLAIM),
    ("Oh no, sorry to hear that. Good luck!", NO_CLAIM),
    ("Yeah. Maybe.", NO_CLAIM),
]


@pytest.mark.parametrize(("text", "expected"), SMALL_TALK, ids=[t for t, _ in SMALL_TALK])
def test_small_talk_around_a_claim_leaves_the_turn_fully_covered(
    text: str, expected: frozenset[Triple]
) -> None:
    # Given claims (or none) with conjuncts or clauses of small talk only
    # When the rules read it
    result = extract_with_rules(text)
    # Then the claims come out and nothing is left for the model
    assert _triples(result) == expected
    assert result.fully_covered is True


def test_act_as_is_role_play_only_as_a_request() -> None:
    # Given "act as" in a plain description, and as a request to the assistant
    described = extract_with_rules("These shutters act as insulation. I live in Dublin.")
    requested = extract_with_rules("Act as my tutor. I live in Dublin.")
    # Then the description is not fiction: its first sentence is knowledge the rules did not
    # read, and the claim stays a plain statement
    assert described.fully_covered is False
    assert [c.quality.verdict for c in described.candidates] == ["keep"]
    # And the request makes the turn role-play
    assert [c.quality.reason for c in requested.candidates] == ["role_play"]


def test_an_unnamed_relative_yields_nothing_rather_than_an_invented_name() -> None:
    # Given a claim about a relative the user did not name
    # When the rules read it
    result = extract_with_rules("My brother works at Tesla.")
    # Then no candidate is invented and the turn is left to the LLM
    assert result.candidates == ()
    assert result.fully_covered is False


# --------------------------------------------------------------------------------------------
# Spans, roles, determinism
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"), CLAIMS + GUARDED, ids=[t for t, _ in CLAIMS + GUARDED]
)
def test_every_source_span_holds_the_evidence(text: str, expected: frozenset[Triple]) -> None:
    # Given any table sentence
    # When the rules read it
    result = extract_with_rules(text)
    # Then each span lies inside the text and contains the value as written
    assert len(result.candidates) >= len(expected)
    for c in result.candidates:
        assert c.source_span is not None
        assert 0 <= c.source_span.start < c.source_span.end <= len(text)
        evidence = text[c.source_span.start : c.source_span.end]
        if c.attribute != "instruction":  # instructions rewrite "my" to "the user's"
            assert c.value.lower() in evidence.lower()


def test_spans_point_at_each_clause_of_a_compound_turn() -> None:
    # Given a compound turn after a greeting
    text = "Hi! I live in Berlin and I work at SAP."
    # When the rules read it
    result = extract_with_rules(text)
    # Then each claim points at its own clause
    spans = {c.attribute: c.source_span for c in result.candidates}
    assert set(spans) == {"lives_in", "works_at"}
    lives, works = spans["lives_in"], spans["works_at"]
    assert lives is not None
    assert works is not None
    assert text[lives.start : lives.end] == "I live in Berlin"
    assert text[works.start : works.end] == "I work at SAP"


def test_a_restated_full_name_spans_both_mentions() -> None:
    # Given the name, then the full name in a later sentence
    text = "Honestly nothing specific. I'm Marcus, by the way. Marcus Rivera."
    # When the rules read it
    (candidate,) = extract_with_rules(text).candidates
    # Then the evidence runs from the first mention to the full name
    assert candidate.source_span is not None
    evidence = text[candidate.source_span.start : candidate.source_span.end]
    assert evidence == "I'm Marcus, by the way. Marcus Rivera"
    assert candidate.text == "The user's name is Marcus Rivera."


@pytest.mark.parametrize("role", ["assistant", "system", "tool"])
def test_non_user_turns_yield_nothing_and_are_not_covered(role: str) -> None:
    # Given a turn that is not the user's own words
    # When the rules read it
    result = extract_with_rules("I live in Berlin and I work at SAP.", role=role)
    # Then nothing is extracted and the turn is not claimed as understood
    assert result == RuleExtraction(candidates=(), fully_covered=False)


def test_extraction_is_deterministic() -> None:
    # Given the whole table as one turn
    text = " ".join(t for t, _ in CLAIMS + GUARDED)
    observed = datetime(2025, 5, 15, 9, 0, tzinfo=UTC)
    # When it is read twice
    first = extract_with_rules(text, observed_at=observed, source_turn_id="t1")
    second = extract_with_rules(text, observed_at=observed, source_turn_id="t1")
    # Then both runs agree candidate for candidate, in order
    assert first == second
    assert [c.model_dump() for c in first.candidates] == [c.model_dump() for c in second.candidates]


def test_duplicate_claims_in_one_turn_collapse() -> None:
    # Given a turn that says the same thing twice
    # When the rules read it
    result = extract_with_rules("I live in Berlin. Yes, I live in Berlin!")
    # Then one candidate remains
    assert _triples(result) == {_user("lives_in", "Berlin")}


# --------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------

_CITY = st.sampled_from(["Berlin", "New York City", "São Paulo", "Rio de Janeiro", "Austin"])
_ENDINGS = st.sampled_from(["", ".", "!", " now.", " with my wife.", " these days", "!!!"])


@given(city=_CITY, ending=_ENDINGS)
def test_a_stated_city_comes_back_verbatim(city: str, ending: str) -> None:
    # Given "I live in <city>" with any common ending
    text = f"I live in {city}{ending}"
    # When the rules read it
    result = extract_with_rules(text)
    # Then the value is the city exactly as written, trailing words and punctuation dropped
    assert _triples(result) == {_user("lives_in", city)}


@settings(max_examples=300)
@given(text=st.text(max_size=300))
def test_any_text_yields_valid_candidates_without_raising(text: str) -> None:
    # Given arbitrary text
    # When the rules read it
    result = extract_with_rules(text)
    # Then it never raises, and every candidate is valid with a span inside the text
    for c in result.candidates:
        assert isinstance(c, Candidate)
        assert c.source_span is not None
        assert c.source_span.end <= len(text)


_WORDS = st.sampled_from(
    [
        "I",
        "I'm",
        "my",
        "live",
        "in",
        "Berlin",
        "love",
        "not",
        "a",
        "nurse",
        "sister",
        "Ana",
        "work",
        "at",
        "Google",
        "and",
        "but",
        "if",
        "always",
        "use",
        "don't",
        "anymore",
        ",",
        ".",
        "?",
        "call",
        "me",
        "Mo",
        "allergic",
        "to",
        "peanuts",
        "vegan",
        "is",
        "Priya",
        "moved",
    ]
)


@settings(max_examples=300)
@given(words=st.lists(_WORDS, max_size=25))
def test_claim_shaped_noise_keeps_values_inside_their_evidence(words: list[str]) -> None:
    # Given random sentences built from claim vocabulary
    text = re.sub(r" ([,.?])", r"\1", " ".join(words))
    # When the rules read them
    result = extract_with_rules(text)
    # Then every non-instruction value is found in the span it cites
    for c in result.candidates:
        assert c.source_span is not None
        evidence = text[c.source_span.start : c.source_span.end].lower()
        if c.attribute != "instruction":
            assert c.value.lower() in evidence


# Forms the rules must not guess at: each one defers to the LLM (or DeferredNoLLM offline) with
# no memory of its own, because any value a rule could cut from it would be wrong.
DEFERRED: list[str] = [
    # a phrase cut mid-way, or a clause swallowed into the value
    "I love baking and its become a weekly thing for us.",
    "I enjoy volunteering at the food bank near our place.",
    "I really enjoy the sounds and smells of the farmers market.",
    "I'm allergic to dogs with thick double coats.",
    # something of the other speaker, of a pronoun, or of a named person
    "I love your new haircut!",
    "I like walking them after dinner on the beach.",
    "I adore his watercolor landscapes so much.",
    "I really like Jenna's leather jacket.",
    "I love the photo you sent of the lake.",
    # the sentence's polarity is not the rule's
    "I don't love crowded beaches in August.",
    "I used to enjoy skiing with my cousins.",
    "I'm not from Ohio, I just went to college there.",
    "I don't work at the bakery, my sister does.",
    # "anymore" in the middle: the value would read across it
    "I don't use Slack anymore Teams.",
    # transient
    "I love the sunset tonight over the harbour.",
    # a hedge run into the value
    "Honestly I enjoy board games probably.",
    # filler
    "I like the following ideas for the trip: a cabin and a canoe.",
    "I like a bit of everything when it comes to music.",
]


@pytest.mark.parametrize("text", DEFERRED)
def test_what_the_rules_cannot_pin_down_is_deferred_without_a_memory(text: str) -> None:
    # Given a sentence whose value a rule would cut, misattribute or misread
    # When the rules read it
    result = extract_with_rules(text)
    # Then they make no memory of it and leave the turn to the LLM
    assert result.candidates == ()
    assert result.fully_covered is False


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I'm not really into board games.", _user("dislikes", "board games")),
        ("I'm not big on musicals.", _user("dislikes", "musicals")),
        ("I'm not into crosswords anymore.", _user("likes", "crosswords", negated=True)),
        ("I love pottery, it calms me down.", _user("likes", "pottery")),
        ("I love hiking on weekends.", _user("likes", "hiking")),
        ("I love camping trips with my kids.", _user("likes", "camping trips")),
    ],
)
def test_polarity_and_clean_phrase_ends_are_kept(text: str, expected: Triple) -> None:
    # Given a preference whose value ends cleanly, or a negation that says how it is meant
    # When the rules read it
    result = extract_with_rules(text)
    # Then the one memory has the sentence's polarity
    assert _triples(result) == {expected}


@pytest.mark.parametrize(
    "text", ["Never say die.", "Always be yourself.", "Keep calm and carry on."]
)
def test_an_imperative_idiom_is_not_an_instruction(text: str) -> None:
    # Given a motto in the imperative, addressed to no one and about no answer
    # When the rules read it
    result = extract_with_rules(text)
    # Then no instruction is stored
    assert result.candidates == ()


@pytest.mark.parametrize(
    ("text", "confidence", "reason"),
    [
        ("I'm allergic to shellfish.", 0.9, "explicit statement"),
        ("I like pastel colours, I think.", 0.6, "hedge statement"),
        ("Maybe, I'm allergic to shellfish.", 0.6, "hedge statement"),
        ("Um I'm allergic to shellfish?", 0.5, "question statement"),
        # the plan is the next clause's, not this claim's
        ("I'm a nurse and I'll work at Mercy General next year.", 0.9, "explicit statement"),
    ],
)
def test_confidence_follows_the_wording(text: str, confidence: float, reason: str) -> None:
    # Given a claim stated plainly, hedged, asked or planned
    # When the rules read it
    candidate = extract_with_rules(text).candidates[0]
    # Then its confidence and quality reason follow the words, and it is still kept
    assert candidate.confidence == pytest.approx(confidence)
    assert candidate.quality.reason == reason
    assert candidate.quality.verdict == "keep"


def test_a_hedge_in_one_sentence_leaves_the_next_one_plain() -> None:
    # Given a hedged sentence followed by a plain one
    # When the rules read the turn
    by_value = {
        c.value: c.confidence
        for c in extract_with_rules("I'm allergic to kiwi, I think. I live in Leeds.").candidates
    }
    # Then only the hedged claim loses confidence
    assert by_value == {"kiwi": pytest.approx(0.6), "Leeds": pytest.approx(0.9)}


# Issue 22, item 8: chat filler and intensifiers that trail a claim are not part of its value.
# Written for these tests: the same claims as typed in chat, letters stretched or not.
FILLER_STRIPPED: list[tuple[str, Triple]] = [
    ("I really like grilled aubergine tho", _user("likes", "grilled aubergine")),
    ("I love cycling sooo much", _user("likes", "cycling")),
    ("I love swimming so much", _user("likes", "swimming")),
    ("I love knitting soooo much lol", _user("likes", "knitting")),
    ("I like board games tbh", _user("likes", "board games")),
    ("I love horror films ngl", _user("likes", "horror films")),
    ("I love dim sum lmao", _user("likes", "dim sum")),
    ("i like sailing alot", _user("likes", "sailing")),
    ("I like rowing a ton", _user("likes", "rowing")),
    ("I love tacos like crazy", _user("likes", "tacos")),
    ("I love jazz hahaha", _user("likes", "jazz")),
    ("I love salsa dancing hehe", _user("likes", "salsa dancing")),
    ("I enjoy gardening, honestly", _user("likes", "gardening")),
    ("I love poetry fr", _user("likes", "poetry")),
    ("I love rock climbing tooo", _user("likes", "rock climbing")),
    ("I adore ceramics thooo", _user("likes", "ceramics")),
    ("I like sudoku lowkey", _user("likes", "sudoku")),
    ("I love bread baking literally", _user("likes", "bread baking")),
    ("I love carrots lolll", _user("likes", "carrots")),
    ("I like green tea imo", _user("likes", "green tea")),
    ("I love chess big time", _user("likes", "chess")),
    ("I love rainy days ngl", _user("likes", "rainy days")),
    ("I like Thai food a lot actually", _user("likes", "Thai food")),
    ("I love kayaking!!! lol", _user("likes", "kayaking")),
    ("I hate mornings sm", _user("dislikes", "mornings")),
    ("I hate mosquitoes soooo much", _user("dislikes", "mosquitoes")),
    ("I can't stand olives tbh", _user("dislikes", "olives")),
    ("I'm not a fan of musicals tho", _user("dislikes", "musicals")),
    ("I'm really into pottery lol", _user("likes", "pottery")),
    ("I'm a huge fan of the Beatles fr", _user("likes", "the Beatles")),
    ("I'm obsessed with crosswords haha", _user("likes", "crosswords")),
    ("My favorite band is Radiohead tbh", _user("favorite_band", "Radiohead")),
    ("My favorite movie is Inception lol", _user("favorite_movie", "Inception")),
    ("I work as a nurse lol", _user("occupation", "nurse")),
    ("I am a plumber tho", _user("occupation", "plumber")),
    ("I'm a teacher btw", _user("occupation", "teacher")),
    ("I'm a dentist haha", _user("occupation", "dentist")),
    ("I work as the office manager.", _user("occupation", "office manager")),
    ("I work at Spotify lol", _user("works_at", "Spotify")),
    ("I live in Berlin haha", _user("lives_in", "Berlin")),
    ("I live in LA now lol", _user("lives_in", "LA")),
    ("I live in Leeds tbh", _user("lives_in", "Leeds")),
    ("I moved to Denver lmao", _user("lives_in", "Denver")),
    ("I'm from Porto lol", _user("hometown", "Porto")),
    ("I grew up in Cork haha", _user("hometown", "Cork")),
    ("I'm vegetarian btw", _user("diet", "vegetarian")),
    ("I'm allergic to peanuts lol", _user("allergic_to", "peanuts")),
    ("I'm 25 lol", _user("age", "25")),
    ("I'm 33 haha", _user("age", "33")),
    ("my name is Sam lol", _user("name", "Sam")),
    ("I use Obsidian tbh", _user("uses", "Obsidian")),
    ("I prefer tea tbh", _user("prefers", "tea")),
]


@pytest.mark.parametrize(("text", "expected"), FILLER_STRIPPED)
def test_trailing_chat_filler_is_not_part_of_the_value(text: str, expected: Triple) -> None:
    # Given a simple claim followed by chat filler or an intensifier, stretched or not
    # When the rules read it
    result = extract_with_rules(text)
    # Then the one memory holds the clean value, and the filler is not knowledge left over
    assert _triples(result) == {expected}
    assert result.fully_covered is True


# Values the rules cannot bound: cut mid-phrase, carrying chat or a joining shorthand, ending on
# an adverb, stretched letters inside the thing, a chat pronoun, or taken back as sarcasm. None
# may become a memory; the turn is left whole (an episode, distilled later by a model).
UNSURE_VALUES: list[str] = [
    # cut mid-phrase: the value would end on a preposition, article or conjunction
    "I currently work as the lead designer of a small studio in Oslo.",
    "I work as the head of a tiny design agency.",
    "I work as a manager of the night shift crew.",
    "I'm working as the director of a youth choir.",
    "I work as an editor of a cooking magazine",
    "I work as the owner of a food truck.",
    # stretched letters inside the thing itself
    "I love pizzaaa",
    "I love sushiii so much",
    "I like froggggs",
    "I'm from Texasss",
    # an emoji where the thing should be
    "I love ramen 🍜",
    "I like 🐈 a lot",
    # chat shorthand that joins more to the value
    "I like coffee w oat milk",
    "I love hanging out w friends",
    "I like yoga n pilates",
    "I love bread bc it's cheap",
    "I enjoy baking esp sourdough",
    # an adverb run into the value
    "I use Notion religiously",
    "I use Strava constantly",
    "I love Duolingo weekly",
    # filler words inside the phrase
    "I adore my cats sm",
    "I'm into yoga n stuff",
    # the rest of the sentence is a claim the rule cannot read
    "I love those little cafes in Paris",
    "I like the idea of moving to Spain",
    "I love how the light hits the lake",
    "I'm a big fan of the whole minimalism thing lol",
    "I'm really into photography these days haha",
    "I work at a startup in Boston",
    "I live in a small town near Leeds",
    "I'm from the midwest originally",
    "I love cooking for my family",
    "I really enjoy reading, esp fantasy",
    "I use my phone for everything",
    "i love the beach sooo much rn",
    "I like going to the gym every morning",
    "My favorite food is probably ramen",
    "I'm a huge fan of yours",
    "I love it when you guys come over",
    "I love that for you!",
    "I'm a mom of two",
    "I love going on hikes w my dog",
    "I enjoy walks by the canal near ur place",
    "I love the jokes and gadgets of",
    "I like the colour of",
    "I'm really into the",
    "I work as a",
    "I love dogs with the",
    "I'm allergic to pollen from the",
    "I love bagels w cream cheese",
    "I love pastaaa w pesto",
    "I like the vibe of",
    "I like noodles from that place near ur flat",
    "I work at Initech not Globex",
]


@pytest.mark.parametrize("text", UNSURE_VALUES)
def test_a_value_the_rule_cannot_bound_is_not_a_memory(text: str) -> None:
    # Given a claim whose value would be cut mid-phrase, carry chat, or run on
    # When the rules read it
    result = extract_with_rules(text)
    # Then no memory is made of it and the turn is not reported as understood
    assert result.candidates == ()
    assert result.fully_covered is False


@pytest.mark.parametrize("text", ["I love Mondays... not", "I love Mondays. NOT"])
def test_a_claim_taken_back_by_a_trailing_not_is_sarcasm(text: str) -> None:
    # Given a preference the speaker takes back at the end
    # When the rules read it
    result = extract_with_rules(text)
    # Then whatever they keep is discarded as sarcasm, never stored as a plain preference
    assert all(c.quality.verdict == "discard" for c in result.candidates)
    assert all(c.quality.reason == "sarcasm" for c in result.candidates)


@pytest.mark.parametrize("text", ["I like em", "I love u", "I adore ya", "i like dem a lot"])
def test_a_chat_pronoun_is_not_a_liked_thing(text: str) -> None:
    # Given a preference whose object is a pronoun typed the chat way
    # When the rules read it / Then "em" or "u" is never stored as the thing liked
    assert extract_with_rules(text).candidates == ()


@pytest.mark.parametrize(
    "text",
    [
        "I'm a nurse, not anymore.",
        "I'm a nurse, well, not anymore.",
        "I'm a nurse. Not anymore though.",
        "I work at Initech... no longer, thank god",
        "I don't do yoga anymore, I live in Braga.",
    ],
)
def test_a_retraction_the_rules_cannot_attach_leaves_the_turn_without_rule_claims(
    text: str,
) -> None:
    # Given a retraction the rules do not read as the negation of one claim
    result = extract_with_rules(text)
    # Then they state nothing of the turn (never "is a nurse"), and leave it to a model
    assert result.candidates == ()
    assert not result.fully_covered


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I don't live in Berlin anymore.", ("lives_in", "Berlin", True)),
        ("I no longer work at Acme.", ("works_at", "Acme", True)),
        ("I'm not a nurse anymore.", ("occupation", "nurse", True)),
    ],
)
def test_a_retraction_read_as_a_negated_claim_is_still_stated(
    text: str, expected: tuple[str, str, bool]
) -> None:
    result = extract_with_rules(text)
    assert [(c.attribute, c.value, c.negated) for c in result.candidates] == [expected]
    assert result.fully_covered


@pytest.mark.parametrize("text", ["I use Vim or Emacs.", "I love ramen or sushi."])
def test_alternatives_are_not_one_value(text: str) -> None:
    # Given a value naming alternatives: one of them? both? not one thing
    result = extract_with_rules(text)
    # Then the rules state nothing and leave the turn to a model
    assert result.candidates == () and not result.fully_covered
