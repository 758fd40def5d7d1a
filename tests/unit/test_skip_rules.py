"""`plainly_kept`, the shortcut that keeps a sentence without running the rule chain, must never
keep a sentence that a rule would drop: a wrong shortcut would let chat forms through."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memwrite.pre_filter.skip_rules import match_skip_rule, plainly_kept
from memwrite.segment import Segment

SHORT_META_MAX_CHARS = 20

# Words the forms are made of (greetings, names, first person, evaluations, chat spelling,
# contractions without their apostrophe, meta talk, UI commands) and content words, so that the
# sentences drawn sit on both sides of every rule.
_WORDS = (
    "hey", "Mel", "Caroline", "thanks", "so", "sooo", "haha", "lol", "I", "I'm", "im", "my",
    "we", "love", "that", "thats", "cool", "coool", "great", "you", "your", "was", "were", "it",
    "this", "good", "luck", "take", "care", "have", "a", "nice", "weekend", "let", "me",
    "re-read", "last", "message", "open", "settings", "as", "an", "AI", "kids", "swamped",
    "painting", "work", "Lisbon", "moved", "to", "adoption", "agencies", "2019", "<3", "xD",
    "hope", "all", "is", "well", "works", "for", "chat",
)  # fmt: skip
_ENDINGS = ("", ".", "!", "!!", "...", " :)")


def _chain_keeps(sentence: str) -> bool:
    segment = Segment(sentence, 0, len(sentence))
    return match_skip_rule(segment, short_meta_max_chars=SHORT_META_MAX_CHARS) is None


@settings(max_examples=500)  # a sentence is a few microseconds: draw many
@given(
    st.lists(st.sampled_from(_WORDS), min_size=1, max_size=8),
    st.sampled_from((" ", ", ")),
    st.sampled_from(_ENDINGS),
)
def test_plainly_kept_never_keeps_a_sentence_a_rule_drops(
    words: list[str], separator: str, ending: str
) -> None:
    sentence = separator.join(words) + ending
    if plainly_kept(sentence, SHORT_META_MAX_CHARS):
        assert _chain_keeps(sentence), sentence


def test_a_first_person_sentence_with_two_unknown_words_is_plainly_kept() -> None:
    sentence = "I'm swamped with the kids and work."
    assert plainly_kept(sentence, SHORT_META_MAX_CHARS)
    assert _chain_keeps(sentence)


def test_a_greeting_with_a_first_person_phrase_and_a_name_goes_to_the_rules() -> None:
    sentence = "I love that so much, Caroline!"
    assert not plainly_kept(sentence, SHORT_META_MAX_CHARS)
    assert not _chain_keeps(sentence)  # greeting_ack: "i love that", "so", "much", a name


def test_an_evaluation_with_a_name_and_a_noun_goes_to_the_rules() -> None:
    sentence = "Cool painting, Caroline!"  # two unknown words, but no first-person one
    assert not plainly_kept(sentence, SHORT_META_MAX_CHARS)
    assert not _chain_keeps(sentence)  # evaluation: an opener, its noun and a name
