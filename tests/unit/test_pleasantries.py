"""A greeting or a thanks with nothing else in it is dropped at the pre-filter with a typed
reason; a statement after one is kept. Written in our own words (the real turns are labelled in
`tests/eval/pleasantry_labels.jsonl`)."""

from __future__ import annotations

import pytest

from memwrite.config.settings import PreFilterConfig
from memwrite.pre_filter.checks import screen

PLEASANTRIES = [
    "Morning! hope all is well",
    "haha yes, works for me",
    "lol ok cool thanks for the chat",
    "hey hope you're doing well!",
    "Hi there! Hope your week is going great.",
    "ok sounds like a plan, thanks!",
    "Thanks for the help, really appreciate it",
    "thx for listening",
    "Evening all, hope everyone's good",
    "yep that works for me",
    "Great, thanks for chatting!",
    "haha ok cool",
    "Hey! Just wanted to say hi",
    "thank you so much for your help!!",
    "ok deal, talk tomorrow",
    "Good morning :) hope you slept well",
    "cool cool, thanks again",
    "Alright, heading out. Thanks!",
    "yes!! perfect, that works",
    "Hi again! Hope you had a nice weekend.",
    "Thanks, Sam! Appreciate the kind words <3",
    "See you at the party!",
]
STATEMENTS_AFTER_GREETINGS = [
    "Hi! I moved to Lisbon last month.",
    "Morning! I start my new job at Stripe today.",
    "Hey, hope all is well. I just adopted a puppy named Miso.",
    "Thanks! My sister Ana is visiting next week.",
    "haha yes, I work at Acme too",
    "lol ok cool, I'm vegan btw",
    "Thanks for the chat, I'm flying to Berlin tomorrow.",
    "Hi there! I'm allergic to peanuts, just so you know.",
    "ok sounds good. My daughter turns five on Friday.",
    "Good morning! We finally closed on the house.",
    "Hey! I hope to finish my thesis this week.",
    "thanks so much! I passed my driving test",
    "Hello! My name is Priya and I teach chemistry.",
    "cool, works for me. I'm off work on Mondays anyway.",
    "Evening! Just got back from Tokyo.",
    "Hey, thanks. I switched to Linear last week.",
    "hi hi, I'm Tom, a nurse from Leeds",
    "Thanks! Hope all is well with you. I broke my wrist skiing.",
    "yep! I ran my first marathon on Sunday",
    "Morning, I hope you're well. I'm vegetarian now.",
    "Hope you're well! Hope is my daughter's name, by the way.",
    "Thanks for the help with the move to Denver!",
]


@pytest.mark.parametrize("text", PLEASANTRIES)
def test_a_pleasantry_alone_is_dropped_with_its_rule(text: str) -> None:
    # Given a turn that only greets, thanks, agrees or says goodbye
    # When it is screened with the default config
    reason = screen(text, PreFilterConfig()).reason
    # Then it is dropped, and the reason names the form rule that matched
    assert reason is not None
    assert reason.type == "MatchedSkipPattern"
    assert reason.pattern in {"greeting_ack", "farewell", "encouragement", "reaction"}


@pytest.mark.parametrize("text", STATEMENTS_AFTER_GREETINGS)
def test_a_statement_after_a_greeting_is_kept(text: str) -> None:
    # Given a greeting or a thanks followed by something about the user
    # When it is screened
    screening = screen(text, PreFilterConfig())
    # Then the turn passes, and the statement is in what is kept
    assert screening.reason is None
