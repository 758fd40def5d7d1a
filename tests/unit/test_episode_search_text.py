"""An episode's search text: the end of the turn it replies to, then its own words."""

from __future__ import annotations

from datetime import UTC, datetime

from memwrite.models import QueuedTurn, Role, Source
from memwrite.records.episode import PRECEDING_MAX_CHARS, preceding_of, search_text
from memwrite.topics.matcher import withheld_turn


def turn(text: str, *, preceding: str | None = None, context: str | None = None) -> QueuedTurn:
    return QueuedTurn(
        tenant="t",
        user_id="u",
        session_id="s",
        agent_id=None,
        trace_id="tr",
        turn_id="turn",
        role=Role.USER,
        text=text,
        observed_at=datetime(2025, 4, 2, tzinfo=UTC),
        source=Source.USER_EXPLICIT,
        context=context,
        preceding=preceding,
    )


def test_a_long_turn_before_is_cut_to_its_end_at_a_word() -> None:
    # Given a turn before of many words, ending with the question the reply answers
    before = "word " * 100 + "What got you into pottery?"
    # When its part for the episode is taken
    kept = preceding_of(before)
    # Then it is its end, at most the limit, starting on a whole word
    assert kept is not None and kept.endswith("What got you into pottery?")
    assert len(kept) <= PRECEDING_MAX_CHARS
    assert kept.startswith("word ")


def test_a_short_turn_before_is_kept_whole_and_an_empty_one_not_at_all() -> None:
    assert preceding_of("  How long have you\nbeen married? ") == "How long have you been married?"
    assert preceding_of(" \n ") is None


def test_the_search_text_is_the_turn_before_then_the_answer() -> None:
    answer = "5 years already!"
    question = "How long have you been married?"
    # The turn before, else the question a short answer was kept with, else the words alone
    assert search_text(turn(answer, preceding=question)) == f"{question}\n{answer}"
    assert search_text(turn(answer, context=question)) == f"{question}\n{answer}"
    assert search_text(turn(answer)) == answer


def test_a_withheld_turn_keeps_no_word_of_the_turn_before() -> None:
    # Given a turn of an excluded topic, kept with the turn before it
    kept = turn("The chemo is working.", preceding="How did it go?", context="How did it go?")
    # When it is withheld (a placeholder over its words in the session log)
    withheld = withheld_turn(kept, "health")
    # Then neither its words nor those of the turn before remain
    assert withheld.text == "[EXCLUDED:health]"
    assert (withheld.context, withheld.preceding) == (None, None)
