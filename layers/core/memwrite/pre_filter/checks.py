"""Stage 1, pre-filter: the cheapest checks, on every turn, in the API Lambda.

Four operations, first match wins (docs/design.md §1): word count -> skip patterns (per
sentence, with the policy firewall) -> rate gate -> role gate. The pure part (`screen`) needs
no state; `pre_filter_turn` adds the rate gate.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache, wraps
from typing import NamedTuple, ParamSpec

from memwrite.config.settings import FirewallAction, PreFilterConfig
from memwrite.config.tenant_overrides import UserSkipPattern
from memwrite.guards.linear_regex import SentencePattern
from memwrite.ids import content_hash
from memwrite.models import Decision, PreFilterDecision, Role
from memwrite.pre_filter.firewall import Finding, mask, normalise, scan
from memwrite.pre_filter.rate_gate import RateGate
from memwrite.pre_filter.skip_rules import (
    CONTEXT_QUESTION_RULES,
    NOT_ANSWERABLE_RULES,
    compile_user_patterns,
    is_answer_word,
    match_skip_rule,
    plainly_kept,
)
from memwrite.reasons import (
    AssistantTurn,
    MatchedSkipPattern,
    NonConversationalTurn,
    PolicyBlocked,
    RateLimited,
    Reason,
    SecretKind,
    SkipReason,
    TooShort,
    UserRule,
)
from memwrite.segment import Segment, reassemble, sentences_of, split_segments

__all__ = [
    "Screening",
    "after_rate_gate",
    "count_words",
    "decision_of",
    "gate_turn",
    "mask_secrets",
    "may_be_short_answer",
    "pre_filter_turn",
    "question_of",
    "rate_key",
    "rule_name",
    "screen",
]

_P = ParamSpec("_P")
STAGE = "pre_filter"
# A turn this short whose every sentence was dropped may still answer the question before it.
SHORT_ANSWER_MAX_WORDS = 6
_ALPHANUMERIC = re.compile(r"[^\W_]")


def count_words(text: str) -> int:
    return len(text.split())


def may_be_short_answer(content: str) -> bool:
    """Whether a turn is short enough to be kept as the answer to the question before it."""
    return count_words(normalise(content)) <= SHORT_ANSWER_MAX_WORDS


def rule_name(reason: Reason) -> str:
    """What a rejection is counted under: the skip rule's name, else the reason's type."""
    if isinstance(reason, MatchedSkipPattern):
        return reason.pattern
    if isinstance(reason, UserRule):
        return f"user:{reason.name}"
    return reason.type


class Screening(NamedTuple):
    """The stateless verdict: a skip reason, or the kept text with what was redacted.

    `context` is the question a short answer was kept with (masked like the text);
    `sentences` counts the sentences judged and `dropped_by` names the rule of each dropped.
    A named tuple: one is built per turn, and a frozen dataclass's construction costs three
    times as much."""

    reason: SkipReason | None
    text: str | None
    redacted: tuple[SecretKind, ...] = ()
    context: str | None = None
    sentences: int = 0
    dropped_by: tuple[str, ...] = ()
    # `question_of` the turn, found from its judged sentences (`judged`; a too-short turn's
    # are not): what a short answer in the next request may answer, without judging it twice.
    ends_with: str | None = None
    judged: bool = False


@lru_cache(maxsize=256)
def _compiled(patterns: tuple[UserSkipPattern, ...]) -> tuple[tuple[str, SentencePattern], ...]:
    return compile_user_patterns(patterns)


@lru_cache(maxsize=256)
def _skip_reason(rule: str, user_rule: bool) -> SkipReason:
    """One frozen reason per rule name, shared by every sentence the rule drops."""
    return UserRule(name=rule) if user_rule else MatchedSkipPattern(pattern=rule)


@lru_cache(maxsize=256)
def _too_short(words: int, min_words: int) -> TooShort:
    return TooShort(word_count=words, min_words=min_words)


def mask_secrets(text: str) -> str:
    """The turn with every secret and PII masked: the form used for ids and hashes."""
    normalised = normalise(text)
    findings = scan(normalised)
    return mask(normalised, findings) if findings else normalised


def _inside(segment_start: int, segment_end: int, findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.start < segment_end and f.end > segment_start]


@dataclass(slots=True)
class _Verdict:
    """One segment's fate: kept (masked text) or dropped for a reason."""

    text: str
    masked: str
    reason: SkipReason | None
    rule: str | None = None


def _judge_segments(text: str, config: PreFilterConfig) -> tuple[list[_Verdict], list[SecretKind]]:
    findings = [f for f in scan(text) if f.kind not in config.allowed_pii]
    sentences = None if findings or config.user_skip_patterns else sentences_of(text)
    if sentences is not None:
        # The common turn: no secret to mask, no tenant rule, no block; most sentences are
        # decided by `plainly_kept` alone. The rules read a segment's text, not its offsets.
        max_chars = config.short_meta_request_max_chars
        verdicts = [
            _Verdict(sentence, sentence, None)
            if plainly_kept(sentence, max_chars)
            else _judged(Segment(sentence, 0, len(sentence)), sentence, config)
            for sentence in sentences
        ]
        return _keep_context_questions(verdicts), []
    verdicts = []
    redacted: list[SecretKind] = []
    for segment in split_segments(text):
        masked = segment.text
        if findings:
            secrets = _inside(segment.start, segment.end, findings)
            redacted.extend(f.kind for f in secrets if f.kind not in redacted)
            blocking = [
                f for f in secrets if config.firewall_actions.get(f.kind) is FirewallAction.BLOCK
            ]
            if blocking:
                verdicts.append(_Verdict(segment.text, "", PolicyBlocked(kind=blocking[0].kind)))
                continue
            masked = mask(segment.text, secrets, offset=segment.start)
        verdicts.append(_judged(segment, masked, config))
    return _keep_context_questions(verdicts), redacted


def _judged(segment: Segment, masked: str, config: PreFilterConfig) -> _Verdict:
    """A segment judged by every skip rule (built-in, then the tenant's)."""
    matched = match_skip_rule(
        segment,
        short_meta_max_chars=config.short_meta_request_max_chars,
        user_patterns=_compiled(config.user_skip_patterns),
    )
    if matched is None:
        return _Verdict(segment.text, masked, None)
    reason = _skip_reason(matched.name, matched.user_rule)
    return _Verdict(segment.text, masked, reason, matched.name)


def _keep_context_questions(verdicts: list[_Verdict]) -> list[_Verdict]:
    """A question dropped for its form stays when a kept sentence follows: it is that
    sentence's context ("who runs the project? I think it's Priya")."""
    kept_after = False
    for verdict in reversed(verdicts):
        if verdict.reason is None:
            kept_after = True
        elif kept_after and verdict.rule in CONTEXT_QUESTION_RULES:
            verdict.reason = None
    return verdicts


def question_of(turn: str, config: PreFilterConfig) -> str | None:
    """The question that ends a turn, masked; None if it ends otherwise or if the question is a
    pleasantry ("How are you?") or talk about the conversation. A short answer to that turn is
    kept with it; it also stands in for the turn itself as `previous`."""
    verdicts, _ = _judge_segments(normalise(turn), config)
    return _question_in(verdicts)


def _question_in(verdicts: list[_Verdict]) -> str | None:
    """`question_of` a turn whose sentences are judged (`verdicts`)."""
    if not verdicts:
        return None
    last = verdicts[-1]
    if not last.text.rstrip().endswith("?") or isinstance(last.reason, PolicyBlocked):
        return None
    if last.rule in NOT_ANSWERABLE_RULES:
        return None
    return last.masked


def _short_answer(
    text: str, config: PreFilterConfig, previous: str, verdicts: list[_Verdict] | None
) -> Screening | None:
    """A short turn kept with the question just before it ("Tomato soup", "Yeah"), or None.

    `verdicts` are the turn's sentences when they were judged (all dropped); a too-short turn
    is judged here. A turn that is only a pleasantry ("thanks!", "lol") answers nothing, unless
    it holds an answer word ("Yeah", "nope", or "Amazing!" to "How was the concert?")."""
    if not _ALPHANUMERIC.search(text):
        return None
    redacted: list[SecretKind] = []
    if verdicts is None:
        verdicts, redacted = _judge_segments(text, config)
    if any(isinstance(v.reason, PolicyBlocked | UserRule) for v in verdicts):
        return None
    question = question_of(previous, config)
    if question is None:
        return None
    if any(v.reason is not None for v in verdicts) and not is_answer_word(text, question):
        return None
    answer = reassemble([v.masked for v in verdicts])
    return Screening(None, answer, tuple(redacted), context=question)


def screen(content: str, config: PreFilterConfig, previous: str | None = None) -> Screening:
    """Word count, then per-sentence skip rules and firewall; the rest is reassembled.

    `previous` is the turn before this one in the conversation (any role): a short answer to
    the question it ends with passes with that question as `context`."""
    text = normalise(content)
    words = count_words(text)
    too_short = words < config.min_words
    verdicts, redacted = ([], []) if too_short else _judge_segments(text, config)
    kept = [v.masked for v in verdicts if v.reason is None]
    dropped_by = tuple([rule_name(v.reason) for v in verdicts if v.reason is not None])
    ends = None if too_short else _question_in(verdicts)
    if kept:
        # A short kept turn ("kinda boring tbh") still reads better with its question.
        question = (
            question_of(previous, config) if previous and words <= SHORT_ANSWER_MAX_WORDS else None
        )
        kept_text = reassemble(kept)
        return Screening(
            None, kept_text, tuple(redacted), question, len(verdicts), dropped_by, ends, True
        )
    if previous is not None and words <= SHORT_ANSWER_MAX_WORDS:
        answer = _short_answer(text, config, previous, verdicts if not too_short else None)
        if answer is not None:
            return answer if too_short else answer._replace(ends_with=ends, judged=True)
    if too_short:
        return Screening(_too_short(words, config.min_words), None)
    first = verdicts[0].reason
    assert first is not None  # every segment was dropped for a reason
    return Screening(
        first, None, sentences=len(verdicts), dropped_by=dropped_by, ends_with=ends, judged=True
    )


def gate_turn(
    *,
    content: str,
    role: Role,
    config: PreFilterConfig,
    rate_gate: RateGate | None,
    rate_scope: str,
    claimant: str,
    now: float,
    previous: str | None = None,
) -> tuple[Screening, SkipReason | None]:
    """The full stage-1 decision for one turn, without building its model: the screening, and
    the reason the turn is skipped (the screening's, or a later gate's), None when it passes.

    `rate_scope` identifies whose repeats are limited (tenant and user); `claimant` is the turn
    id, so a client re-sending the same turn is not rate-limited against itself; `previous` is
    the conversation's turn before this one, when known (short answers keep its question).
    `rate_gate` None skips the rate gate (a turn already accepted is not a repeat of itself).
    """
    screening = screen(content, config, previous)
    if screening.reason is not None or screening.text is None:
        return screening, screening.reason
    key = rate_key(screening, rate_scope)
    admitted = rate_gate is None or rate_gate.admit(
        key, claimant, now, config.rate_limit_window_secs
    )
    return screening, after_rate_gate(role, config, admitted=admitted)


def rate_key(screening: Screening, rate_scope: str) -> str:
    """What the rate gate counts repeats of: a kept turn's words (with a short answer's
    question: "Yeah" answering two different questions is two different facts)."""
    assert screening.text is not None
    repeatable = (
        screening.text if screening.context is None else f"{screening.context}\n{screening.text}"
    )
    return content_hash(rate_scope, repeatable.casefold())


def after_rate_gate(role: Role, config: PreFilterConfig, *, admitted: bool) -> SkipReason | None:
    """The reason a kept turn is skipped by the rate gate (`admitted` False) or the role gate."""
    if not admitted:
        return RateLimited(window_secs=config.rate_limit_window_secs)
    if role is Role.ASSISTANT and not config.extract_from_assistant:
        return AssistantTurn()
    if role in (Role.SYSTEM, Role.TOOL):
        return NonConversationalTurn(role=role.value)
    return None


def decision_of(screening: Screening, reason: SkipReason | None) -> PreFilterDecision:
    """`gate_turn`'s result as the `PreFilterDecision` model."""
    # What the skip rules did is counted whatever the later gates decide.
    judged = {"sentences": screening.sentences, "dropped_by": screening.dropped_by}
    if reason is not None or screening.text is None:
        return PreFilterDecision(decision=Decision.SKIP, reason=reason, **judged)
    return PreFilterDecision(
        decision=Decision.PASS,
        text=screening.text,
        redacted=screening.redacted,
        context=screening.context,
        **judged,
    )


def _as_model(
    gate: Callable[_P, tuple[Screening, SkipReason | None]],
) -> Callable[_P, PreFilterDecision]:
    @wraps(gate)
    def decide(*args: _P.args, **kwargs: _P.kwargs) -> PreFilterDecision:
        return decision_of(*gate(*args, **kwargs))

    return decide


# The full stage-1 decision for one turn as its model (the API's and the oracle's); the CLI
# writes its lines from `gate_turn` directly, without building the model.
pre_filter_turn = _as_model(gate_turn)
