"""Pre-filter decisions: the seed's worked examples, every named rule, sentence-level keeping."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memwrite.config.settings import PreFilterConfig
from memwrite.config.tenant_overrides import UserSkipPattern
from memwrite.models import Decision, PreFilterDecision, Role
from memwrite.pre_filter.checks import pre_filter_turn, screen
from memwrite.pre_filter.rate_gate import RateGate
from memwrite.pre_filter.skip_rules import compile_user_patterns
from memwrite.reasons import (
    AssistantTurn,
    MatchedSkipPattern,
    NonConversationalTurn,
    RateLimited,
    TooShort,
    UserRule,
)

DEFAULT = PreFilterConfig()


def decide(
    content: str, role: Role = Role.USER, config: PreFilterConfig = DEFAULT
) -> PreFilterDecision:
    return pre_filter_turn(
        content=content,
        role=role,
        config=config,
        rate_gate=RateGate(100),
        rate_scope="tenant|user",
        claimant=content,
        now=1_000.0,
    )


# The worked examples of docs/design.md §1, with the default config.
WORKED_EXAMPLES = [
    ("hi", TooShort(word_count=1, min_words=3)),
    ("ok thanks 👍", MatchedSkipPattern(pattern="greeting_ack")),
    ("I just finished the Arrive interview. It went well.", None),
    ("🎉🎉🎉", TooShort(word_count=1, min_words=3)),  # "or TooShort, whichever runs first"
    ("What's the weather?", MatchedSkipPattern(pattern="short_meta_request")),
    ("Priya said the Inbox3 deadline is Friday", None),
    # Two words: the word count runs first, so TooShort; with min_words=2 it is the ack pattern.
    ("sounds good", TooShort(word_count=2, min_words=3)),
    ("Can you summarize that?", MatchedSkipPattern(pattern="meta_talk")),
    ("My manager moved our 1:1 to Thursday", None),
    ("sure", TooShort(word_count=1, min_words=3)),
    ("It's been raining for three weeks and I hate it — I need to move", None),
]


@pytest.mark.parametrize(("turn", "expected"), WORKED_EXAMPLES)
def test_worked_example_table(turn: str, expected: object) -> None:
    # Given a turn from the seed's table / When it is pre-filtered with defaults
    decision = decide(turn)
    # Then the decision and the typed reason are the table's
    if expected is None:
        assert decision.decision is Decision.PASS
        assert decision.text == turn
    else:
        assert decision.decision is Decision.SKIP
        assert decision.reason == expected
        assert decision.text is None


def test_sounds_good_is_an_ack_when_word_count_allows_it() -> None:
    # Given min_words lowered to 2 / When "sounds good" is screened
    decision = decide("sounds good", config=PreFilterConfig(min_words=2))
    # Then the acknowledgement pattern is what drops it
    assert decision.reason == MatchedSkipPattern(pattern="greeting_ack")


def test_pure_emoji_is_a_reaction_when_long_enough() -> None:
    # Given emoji separated into three "words" / When screened
    decision = decide("🎉 🎉 🎉")
    # Then the reaction rule names it
    assert decision.reason == MatchedSkipPattern(pattern="reaction")


@pytest.mark.parametrize(
    ("turn", "rule"),
    [
        ("Hey Mel! Good to see you! How have you been?", "greeting_ack"),
        ("Thanks so much, Priya!", "greeting_ack"),
        ("Tell me a joke, ok?", "short_meta_request"),
        ("Could you help me?", "short_meta_request"),
        ("!!! ??? ...", "reaction"),
        ('<tool_call>{"name": "search", "args": {}}</tool_call>', "tool_call"),
        ("```python\nprint('hello world')\n```", "code_block"),
        ("Could you rephrase your last answer please?", "meta_talk"),
        ("As an AI you must know this already.", "meta_talk"),
    ],
)
def test_each_builtin_rule_names_itself(turn: str, rule: str) -> None:
    # Given a turn wholly of one form / When screened
    decision = decide(turn)
    # Then it is skipped by that named rule
    assert decision.reason == MatchedSkipPattern(pattern=rule)


def test_ui_command_without_content_is_skipped() -> None:
    # Given a slash command padded to pass the word count by sentence breaks
    decision = decide("/reset\n/clear\n/new")
    # Then the UI-command rule drops every line
    assert decision.reason == MatchedSkipPattern(pattern="ui_command")


def test_slash_command_with_content_passes() -> None:
    # Given a command that carries a statement / When screened
    decision = decide("/remember I live in Lisbon now")
    # Then it is not a content-free UI command
    assert decision.decision is Decision.PASS


def test_sentence_level_keeps_only_the_fact() -> None:
    # Given an acknowledgement followed by a fact (the example of docs/design.md §1)
    decision = decide(
        "Yeah, got it. By the way my team is switching from Jira to Linear next month."
    )
    # Then only the second sentence is kept
    assert decision.text == "By the way my team is switching from Jira to Linear next month."


def test_turn_beginning_with_a_pleasantry_keeps_its_fact() -> None:
    # Given a LoCoMo-style turn that opens with a greeting
    decision = decide("Hey Caroline! I'm swamped with the kids & work. What's up with you?")
    # Then the fact survives and the pleasantries do not
    assert decision.decision is Decision.PASS
    assert decision.text == "I'm swamped with the kids & work."
    # And each dropped sentence is named by its rule, for the per-rule metrics
    assert decision.sentences == 3
    assert decision.dropped_by == ("greeting_ack", "short_meta_request")


def test_question_that_carries_a_fact_passes_whole() -> None:
    # Given a question plus a fact (pre-filter owns forms, not content)
    decision = decide("who manages the project? I think it might be Priya")
    # Then nothing is dropped
    assert decision.text == "who manages the project? I think it might be Priya"


def test_user_rule_is_named() -> None:
    # Given a tenant pattern for ticket boilerplate
    config = PreFilterConfig(
        user_skip_patterns=(UserSkipPattern(name="ticket_footer", pattern=r"ticket #\d+ closed"),)
    )
    # When a turn is only that boilerplate / Then UserRule names it
    assert decide("Ticket #4411 closed.", config=config).reason == UserRule(name="ticket_footer")
    # And a fact next to it is kept
    kept = decide("Ticket #4411 closed. I moved to the Denver office.", config=config)
    assert kept.text == "I moved to the Denver office."
    assert kept.dropped_by == ("user:ticket_footer",)


def test_builtin_rules_win_over_user_rules() -> None:
    # Given a user pattern that also matches a greeting
    config = PreFilterConfig(user_skip_patterns=(UserSkipPattern(name="greet", pattern=".*"),))
    # When a pure greeting is screened / Then the built-in rule, first in order, is reported
    assert decide("hello there, thanks!", config=config).reason == MatchedSkipPattern(
        pattern="greeting_ack"
    )


@pytest.mark.parametrize("pattern", ["(unclosed", r"(a)\1 again", r"(?=fact)\w+", r"(?<!x)y"])
def test_a_pattern_the_linear_engine_refuses_is_rejected_at_config_time(pattern: str) -> None:
    # Given a pattern that does not compile, or needs backtracking (backreference, lookaround)
    # Then the config refuses it, naming the engine
    with pytest.raises(ValueError, match="RE2"):
        UserSkipPattern(name="broken", pattern=pattern)


def test_a_catastrophic_pattern_runs_on_the_linear_engine() -> None:
    # Given a tenant pattern that backtracks exponentially on Python's `re`
    evil = UserSkipPattern(name="evil", pattern="(a+)+$")
    config = PreFilterConfig(user_skip_patterns=(evil,), min_words=1)
    compiled = compile_user_patterns(config.user_skip_patterns)
    # Then it runs on RE2 (linear time), and a 40-character turn of it is answered as usual
    assert all("re2._Regexp" in repr(match) for _, match in compiled)
    kept = decide("a" * 39 + "b", config=config)
    assert kept.reason is None or kept.reason != UserRule(name="evil")
    assert decide("a" * 40, config=config).reason == UserRule(name="evil")


def test_role_gate_skips_assistant_turns_by_default() -> None:
    # Given an assistant turn with content / When screened with defaults
    decision = decide("You mentioned you live in Berlin.", role=Role.ASSISTANT)
    # Then the role gate drops it
    assert decision.reason == AssistantTurn()


def test_role_gate_admits_assistant_turns_when_enabled() -> None:
    config = PreFilterConfig(extract_from_assistant=True)
    decision = decide("You mentioned you live in Berlin.", role=Role.ASSISTANT, config=config)
    assert decision.decision is Decision.PASS


def test_system_and_tool_turns_are_not_conversation() -> None:
    decision = decide("The user is on the premium plan today.", role=Role.SYSTEM)
    assert decision.reason == NonConversationalTurn(role="system")


def repeat(gate: RateGate, scope: str, claimant: str, now: float) -> PreFilterDecision:
    """The same content, screened as turn `claimant` of `scope` at `now`."""
    return pre_filter_turn(
        content="I live in Berlin now.",
        role=Role.USER,
        config=DEFAULT,
        rate_gate=gate,
        rate_scope=scope,
        claimant=claimant,
        now=now,
    )


def test_rate_gate_skips_identical_content_within_window() -> None:
    # Given one gate shared by two turns of the same user with the same content
    gate = RateGate(100)
    first = repeat(gate, "t|u", "a", 0.0)
    # When the same content arrives as another turn 30 s later, and again after the window
    second = repeat(gate, "t|u", "b", 30.0)
    later = repeat(gate, "t|u", "c", 61.0)
    # Then only the repeat inside the window is rate limited
    assert first.decision is Decision.PASS
    assert second.reason == RateLimited(window_secs=60)
    assert later.decision is Decision.PASS


def test_rate_gate_lets_the_same_turn_be_resent() -> None:
    # Given a turn admitted once / When the same claimant (turn id) is screened again
    gate = RateGate(100)
    repeat(gate, "t|u", "same", 0.0)
    again = repeat(gate, "t|u", "same", 1.0)
    # Then it is not rate limited against itself (the ledger reports it as a duplicate)
    assert again.decision is Decision.PASS


def test_rate_gate_is_per_user() -> None:
    gate = RateGate(100)
    repeat(gate, "t|alice", "a", 0.0)
    other = repeat(gate, "t|bob", "b", 1.0)
    assert other.decision is Decision.PASS


def test_rate_map_is_bounded() -> None:
    # Given a gate that remembers 2 entries / When 3 distinct contents pass
    gate = RateGate(2)
    for index in range(3):
        assert gate.admit(f"key{index}", f"c{index}", 0.0, 60)
    # Then the oldest was evicted (no shared store: it can pass again) and the newest cannot
    assert gate.admit("key0", "other", 1.0, 60)
    assert not gate.admit("key2", "other", 1.0, 60)


class SharedClaims:
    """A `RateStore` in a dict, with the stores' condition (an unexpired claim of another
    claimant refuses; expiries in whole seconds); counts its writes."""

    def __init__(self) -> None:
        self.claims: dict[str, tuple[str, int]] = {}
        self.writes = 0

    def claim_all(self, claims: Sequence[tuple[str, str, float]], window_secs: int) -> list[bool]:
        self.writes += 1
        granted = []
        for key, claimant, now in claims:
            held = self.claims.get(key)
            ok = held is None or held[1] <= int(now) or held[0] == claimant
            if ok:
                self.claims[key] = (claimant, int(now) + window_secs)
            granted.append(ok)
        return granted


CLAIM = st.tuples(st.sampled_from("abcdef"), st.sampled_from("xyz"), st.floats(0, 150))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(requests=st.lists(st.lists(CLAIM, max_size=8), max_size=6), remembers=st.integers(1, 5))
def test_a_request_s_claims_in_one_write_decide_as_one_claim_after_another(
    requests: list[list[tuple[str, str, float]]], remembers: int
) -> None:
    # Given two gates of the same bound, each with its own shared store
    one_by_one, batched = SharedClaims(), SharedClaims()
    gate, batch_gate = RateGate(remembers, one_by_one), RateGate(remembers, batched)
    for claims in requests:
        # When a request's claims go one at a time through one, all at once through the other
        alone = [gate.admit(key, claimant, now, 60) for key, claimant, now in claims]
        together = batch_gate.admit_all(claims, 60)
        # Then every turn is admitted or refused the same, and the stores hold the same
        assert together == alone
        assert batched.claims == one_by_one.claims
    # And the batched gate never wrote more often
    assert batched.writes <= one_by_one.writes


def test_a_request_s_claims_are_one_write() -> None:
    # Given a gate with a shared store / When a request of two new contents is gated
    shared = SharedClaims()
    admitted = RateGate(100, shared).admit_all([("k1", "a", 0.0), ("k2", "b", 0.0)], 60)
    # Then both pass after one write to the store
    assert (admitted, shared.writes) == ([True, True], 1)


def test_screen_is_deterministic_and_stateless() -> None:
    text = "Thanks! I started a new job at Northwind. Can you summarize that?"
    assert screen(text, DEFAULT) == screen(text, DEFAULT)
    assert screen(text, DEFAULT).text == "I started a new job at Northwind."


# Forms that carry nothing durable, one or more per rule, written for these tests.
DROPPED_FORMS = [
    ("Ohh that looks so cozy!", "evaluation"),
    ("Haha, okay that makes sense now", "evaluation"),
    ("Sweet ride, Tomas!", "evaluation"),
    ("that's such a bummer", "evaluation"),
    ("Which part of town are you staying in?", "other_party_question"),
    ("Did you end up going to the Ghibli exhibit?", "other_party_question"),
    ("Got any plans for the long weekend?", "other_party_question"),
    ("How did the move go?", "open_question"),
    ("Where was that photo taken?", "open_question"),
    ("Alright, have a lovely weekend!", "farewell"),
    ("Gotta run, talk to you soon", "farewell"),
    ("So good talking to you, take care Bea", "farewell"),
    ("You got this, keep going!", "encouragement"),
    ("So sorry to hear that, Nadia.", "encouragement"),
    ("Wait, let me re-read your last message", "meta_talk"),
    ("Coming back to your earlier point", "meta_talk"),
    ("Please open the settings menu", "ui_command"),
    ("Please close the sidebar", "ui_command"),
    ("Chào bạn, cảm ơn nhiều!", "greeting_ack"),
    ("Merci beaucoup, Lucie", "greeting_ack"),
    ("lmaooo thats sooo true", "greeting_ack"),
]


@pytest.mark.parametrize(("turn", "rule"), DROPPED_FORMS)
def test_forms_without_durable_content_are_dropped(turn: str, rule: str) -> None:
    # Given a sentence that only reacts, asks about the other party, says goodbye, talks about
    # the conversation, drives the UI or greets in another language / When screened
    result = screen(turn, DEFAULT)
    # Then it is dropped and the rule that matched is named
    assert result.reason == MatchedSkipPattern(pattern=rule)


KEPT_CLAIMS = [
    # A first-person word or a named third party makes it a claim, whatever its form.
    "That sounds awesome, I'm signing up for the same course.",
    "Have you met my new flatmate Jonas?",
    "Did you hear that Ingrid quit her job at the bakery?",
    "It was amazing, the food in Oaxaca blew me away.",
    "Enjoy your evening, I'm off to my pottery class.",
    "Sorry to hear that, my dad went through the same surgery last year.",
    "Who is Marta's new manager at the clinic?",
    "The hike was brutal but the view from the summit was worth it.",
    "im allergic to shellfish so no paella for me",
]


@pytest.mark.parametrize("turn", KEPT_CLAIMS)
def test_sentences_with_a_claim_are_never_dropped(turn: str) -> None:
    # Given a sentence of a droppable form that also carries a claim or a fact / When screened
    result = screen(turn, DEFAULT)
    # Then it passes whole
    assert result.reason is None
    assert result.text == turn


def test_dropped_reaction_and_question_leave_the_fact_behind() -> None:
    # Given a reaction, a question about the other party and a fact in one turn
    turn = "Oh wow, that's so cool! Do you go there often? I started climbing in March."
    # When screened / Then only the fact is kept
    assert screen(turn, DEFAULT).text == "I started climbing in March."


def test_open_question_stays_as_context_of_the_answer_after_it() -> None:
    # Given a question answered in the same turn / When screened
    turn = "Who is hosting the reunion? Probably my cousin Dev, he has the big garden."
    # Then the question is kept with its answer
    assert screen(turn, DEFAULT).text == turn


SHORT_ANSWERS = [
    ("What's your go-to pizza topping?", "Anchovies"),
    ("Which team do you support these days?", "Still Arsenal"),
    ("Do you have any pets?", "Yeah"),
    ("Have you ever been skiing?", "nope, never"),
    ("What did you think of the sequel?", "kinda boring"),
]


@pytest.mark.parametrize(("question", "answer"), SHORT_ANSWERS)
def test_short_answer_passes_with_its_question(question: str, answer: str) -> None:
    # Given a short turn that answers the question ending the previous turn
    previous = f"Ha, fair enough. {question}"
    # When screened with that previous turn / Then it passes with the question as context
    result = screen(answer, DEFAULT, previous)
    assert (result.reason, result.text, result.context) == (None, answer, question)
    # And without the previous turn it is still too short
    assert isinstance(screen(answer, DEFAULT).reason, TooShort)


@pytest.mark.parametrize(
    ("previous", "turn"),
    [
        ("Do you want the window seat?", "thanks!"),  # a pleasantry answers nothing
        ("I moved to Ghent last year.", "Cool stuff"),  # no question before it
        ("How are you?", "Fine"),  # a pleasantry asks nothing
        ("Can you say that again?", "Rome"),  # talk about the conversation asks nothing
    ],
)
def test_short_turn_without_an_answerable_question_stays_too_short(
    previous: str, turn: str
) -> None:
    assert isinstance(screen(turn, DEFAULT, previous).reason, TooShort)


def test_short_answer_context_is_masked() -> None:
    # Given a question that quotes an e-mail address, answered briefly
    previous = "Is hana.berg@example.net still your main address?"
    # When the answer is screened / Then the context carries the placeholder, not the address
    result = screen("Yes it is", DEFAULT, previous)
    assert result.context == "Is [REDACTED:email] still your main address?"


def test_repeated_short_answer_to_different_questions_is_not_rate_limited() -> None:
    # Given one rate gate and "Yeah" answering two different questions within the window
    gate = RateGate(100)
    decisions = [
        pre_filter_turn(
            content="Yeah",
            role=Role.USER,
            config=DEFAULT,
            rate_gate=gate,
            rate_scope="t|u",
            claimant=question,
            now=1_000.0,
            previous=question,
        )
        for question in ("Do you cook?", "Do you have a car?")
    ]
    # Then both pass, each with its own question
    assert [d.context for d in decisions] == ["Do you cook?", "Do you have a car?"]


# Issue 22, item 5: the pre-filter never drops a statement about the speaker. Turns written for
# these tests, in chat's own registers: a greeting or thanks sentence around a statement, a
# statement before a trailing question, an opinion about a named thing, a subject-less claim.
STATEMENTS_KEPT = [
    # a greeting, thanks or praise sentence trimmed, the rest judged on its own
    ("Hey Mel! Been busy, started a new job last week - how are things?", None),
    ("Hi! Good to see you. Been swamped, switched teams at work - how have you been?", None),
    ("Thanks! Finally booked the flights to Hanoi.", "Finally booked the flights to Hanoi."),
    ("Hey Ana! Spent the whole weekend repainting the kitchen.", None),
    ("Aww thank you! Adopted a second cat on Sunday, her name is Pickle.", None),
    ("Yo! Just got back from a week of hiking in the Dolomites.", None),
    ("Morning! Passed my driving test yesterday, third time lucky.", None),
    ("Thanks so much! Moving into the new flat on Friday.", None),
    ("Wow, that's great! Started learning the cello last month myself.", None),
    ("Good to hear from you! Been stuck at home with a sprained ankle.", None),
    # a statement clause before a trailing question to the other party
    ("Been crazy busy with the bakery - how are you?", None),
    ("Got a puppy last weekend, wanna see pics?", None),
    ("Had a blast at the lake with the kids, you?", None),
    ("Moving to Porto in May, any tips?", None),
    ("Signed up for a half marathon in October... crazy, right?", None),
    ("Started night shifts at the hospital; have you ever done those?", None),
    ("Finished the last exam today, how was your week?", None),
    ("Been thinking about getting a dog, any breeds you'd suggest?", None),
    ("Sold my old bike to a neighbour – did you ever get yours fixed?", None),
    ("Took up climbing again after the knee surgery, what about you?", None),
    ("Tacos are great, don't you think?", None),
    ("Quit coffee two weeks ago, can you believe it?", None),
    # an opinion about a named thing (food, place, person, activity)
    ("Tacos are great", None),
    ("Grilled peppers are the best!", None),
    ("Lisbon is gorgeous in the spring.", None),
    ("Paris is lovely", None),
    ("Sushi is so good", None),
    ("Ramen is the best comfort food.", None),
    ("Dumplings are amazing!", None),
    ("Kyoto was magical.", None),
    ("Adoption sounds awesome.", None),
    ("Bouldering is so fun!", None),
    ("Oliver is hilarious!", None),
    ("She's brilliant at chess.", None),
    ("He's been great with the kids.", None),
    ("Mel's so talented", None),
    ("Coriander tastes awful", None),
    ("Berlin was incredible.", None),
    # subject-less statements and other claims without a first-person word
    ("Started a new job last week.", None),
    ("Been learning Portuguese on the train.", None),
    ("Just finished my thesis draft!", None),
    ("Three kids, two dogs and a very tired mum here.", None),
    ("Back from the dentist, two fillings.", None),
    ("Visiting my grandma in Krakow this weekend.", None),
    ("Allergic to cats, sadly.", None),
    ("Working from the Lisbon office till June.", None),
    ("Vegan for five years now.", None),
    ("Off to the allotment to plant leeks.", None),
    ("Love the new bakery on Elm Street, best croissants ever.", None),
    ("Born and raised in Glasgow.", None),
]


@pytest.mark.parametrize(("turn", "kept"), STATEMENTS_KEPT)
def test_a_statement_about_the_speaker_is_never_dropped(turn: str, kept: str | None) -> None:
    # Given a turn that says something about the speaker, however it is wrapped
    # When screened
    result = screen(turn, DEFAULT)
    # Then it passes, with the statement in the kept text (the whole turn unless given)
    assert result.reason is None, result
    assert result.text is not None
    if kept is not None:
        assert result.text == kept


# Pure pleasantries: reactions to the other party, greetings, thanks, praise and questions that
# carry no statement. With episodes, whatever passes is stored, so these must still go.
PLEASANTRIES_DROPPED = [
    "Hey Mel! Good to see you! How have you been?",
    "Thanks, Jo! That's really sweet of you.",
    "Wow, that's awesome, how did it go?",
    "So anyway, how was the trip?",
    "Oh man, what happened next?",
    "That dress is stunning!",
    "Your garden looks amazing!",
    "That cake looks so good!",
    "Those shoes are gorgeous, Priya!",
    "This photo is beautiful.",
    "Wow, Caroline, that looks amazing!",
    "Wow Mel, looks awesome!",
    "Good for you!",
    "That's awesome, good for you!",
    "Nice one, Tomas!",
    "That is really great Jon!",
    "Haha that's hilarious",
    "Aww, that's so sweet!",
    "That sounds like so much fun!",
    "You're so talented!",
    "Your kids are adorable!",
    "It looks so cozy!",
    "That must have been tough.",
    "Oh no, so sorry to hear that.",
    "Congrats, you deserve it!",
    "Hey Sam, how's it going?",
    "Hi all, hope you're well?",
    "Good morning! How are you today?",
    "Sounds great! What did you end up ordering?",
    "Cool! What kind of music do you play?",
    "Any tips on running, what gear do you need?",
    "BTW, what's your favourite part of the job?",
    "Gina, you ever been to one of those?",
    "It looks sick - is it one you made?",
    "Thanks for sharing, Lea!",
    "Take care, talk soon!",
    "Have a lovely weekend!",
    "Yay, so happy for you!",
    "Lucky you!",
    "What a gorgeous view, Nora!",
    "What a great idea!",
    "That's so true, lol",
    "Omg yes, totally!",
    "Wow, that photo is great!",
    "Your support means a lot.",
    "Fingers crossed for you!",
    "Ooh, how exciting!",
    "Ha, that makes sense now.",
    "Sooo cute!!",
    "That's such a shame.",
    "Wow, how did you manage that?",
    "Nice, when is the show?",
]


@pytest.mark.parametrize("turn", PLEASANTRIES_DROPPED)
def test_a_pure_pleasantry_is_still_dropped(turn: str) -> None:
    # Given a turn that only greets, thanks, praises or reacts to the other party, or asks them
    # a question with no statement of the speaker's own
    # When screened
    result = screen(turn, DEFAULT)
    # Then nothing of it is kept
    assert result.reason is not None, result.text


OPINION_ANSWERS = [
    ("That's wild! How was the concert?", "Amazing!"),
    ("Did you like Rome?", "Loved it"),
    ("What did you think of the new place?", "Pretty rough tbh"),
    ("Do you like jazz?", "Not really"),
    ("How's the new job going?", "Stressful but good"),
]


@pytest.mark.parametrize(("question", "answer"), OPINION_ANSWERS)
def test_a_short_opinion_is_kept_with_the_question_it_answers(question: str, answer: str) -> None:
    # Given a short evaluative or negative answer to a question that asks for it
    # When screened with the turn before it
    result = screen(answer, DEFAULT, question)
    # Then it passes, with the question as its context
    expected_question = question.rsplit("! ", maxsplit=1)[-1]
    assert (result.reason, result.text, result.context) == (None, answer, expected_question)


@pytest.mark.parametrize(
    ("previous", "turn"),
    [
        ("What got you into running?", "Oh cool"),  # a reaction, not an answer to "what"
        ("How are you?", "Great!"),  # a pleasantry asks nothing
        ("Do you want the window seat?", "thanks!"),
    ],
)
def test_an_evaluation_answers_only_a_question_that_asks_for_one(previous: str, turn: str) -> None:
    assert screen(turn, DEFAULT, previous).reason is not None
