"""Stage 1, pre-filter: the cheapest checks, on every turn, in the API Lambda.

Four operations, first match wins (DESIGN.md section 2): word count -> skip patterns (per
sentence, with the policy firewall) -> rate gate -> role gate. The pure part (`screen`) needs
no state; `prefilter_turn` adds the rate gate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from memwrite.config import FirewallAction, PrefilterConfig, UserSkipPattern
from memwrite.firewall import Finding, mask, normalise, scan
from memwrite.ids import content_hash
from memwrite.models import Decision, PrefilterDecision, Role
from memwrite.rate_gate import RateGate
from memwrite.reasons import (
    AssistantTurn,
    MatchedSkipPattern,
    NonConversationalTurn,
    PolicyBlocked,
    RateLimited,
    SecretKind,
    SkipReason,
    TooShort,
    UserRule,
)
from memwrite.segment import reassemble, split_segments
from memwrite.skip_rules import compile_user_patterns, match_skip_rule

__all__ = ["Screening", "count_words", "mask_secrets", "prefilter_turn", "screen"]

STAGE = "pre_filter"


def count_words(text: str) -> int:
    return len(text.split())


@dataclass(frozen=True, slots=True)
class Screening:
    """The stateless verdict: a skip reason, or the kept text with what was redacted."""

    reason: SkipReason | None
    text: str | None
    redacted: tuple[SecretKind, ...] = field(default=())


@lru_cache(maxsize=256)
def _compiled(patterns: tuple[UserSkipPattern, ...]) -> tuple[tuple[str, re.Pattern[str]], ...]:
    return compile_user_patterns(patterns)


def mask_secrets(text: str) -> str:
    """The turn with every secret and PII masked: the form used for ids and hashes."""
    normalised = normalise(text)
    return mask(normalised, scan(normalised))


def _inside(segment_start: int, segment_end: int, findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.start < segment_end and f.end > segment_start]


def screen(content: str, config: PrefilterConfig) -> Screening:
    """Word count, then per-sentence skip rules and firewall; the rest is reassembled."""
    words = count_words(content)
    if words < config.min_words:
        return Screening(TooShort(word_count=words, min_words=config.min_words), None)
    content = normalise(content)
    findings = [f for f in scan(content) if f.kind not in config.allowed_pii]
    user_patterns = _compiled(config.user_skip_patterns)
    kept: list[str] = []
    redacted: list[SecretKind] = []
    first_reason: SkipReason | None = None
    for segment in split_segments(content):
        secrets = _inside(segment.start, segment.end, findings)
        blocking = [
            f for f in secrets if config.firewall_actions.get(f.kind) is FirewallAction.BLOCK
        ]
        if blocking:
            redacted.extend(f.kind for f in blocking if f.kind not in redacted)
            first_reason = first_reason or PolicyBlocked(kind=blocking[0].kind)
            continue
        matched = match_skip_rule(
            segment,
            short_meta_max_chars=config.short_meta_request_max_chars,
            user_patterns=user_patterns,
        )
        if matched is not None:
            if first_reason is None:
                first_reason = (
                    UserRule(name=matched.name)
                    if matched.user_rule
                    else MatchedSkipPattern(pattern=matched.name)
                )
            continue
        kept.append(mask(segment.text, secrets, offset=segment.start))
        redacted.extend(f.kind for f in secrets if f.kind not in redacted)
    if not kept:
        assert first_reason is not None  # every segment was dropped for a reason
        return Screening(first_reason, None)
    return Screening(None, reassemble(kept), tuple(redacted))


def prefilter_turn(
    *,
    content: str,
    role: Role,
    config: PrefilterConfig,
    rate_gate: RateGate,
    rate_scope: str,
    claimant: str,
    now: float,
) -> PrefilterDecision:
    """The full stage-1 decision for one turn.

    `rate_scope` identifies whose repeats are limited (tenant and user); `claimant` is the turn
    id, so a client re-sending the same turn is not rate-limited against itself.
    """
    screening = screen(content, config)
    if screening.reason is not None or screening.text is None:
        return PrefilterDecision(decision=Decision.SKIP, reason=screening.reason)
    rate_key = content_hash(rate_scope, screening.text.casefold())
    if not rate_gate.admit(rate_key, claimant, now, config.rate_limit_window_secs):
        reason: SkipReason = RateLimited(window_secs=config.rate_limit_window_secs)
        return PrefilterDecision(decision=Decision.SKIP, reason=reason)
    if role is Role.ASSISTANT and not config.extract_from_assistant:
        return PrefilterDecision(decision=Decision.SKIP, reason=AssistantTurn())
    if role in (Role.SYSTEM, Role.TOOL):
        return PrefilterDecision(
            decision=Decision.SKIP, reason=NonConversationalTurn(role=role.value)
        )
    return PrefilterDecision(
        decision=Decision.PASS, text=screening.text, redacted=screening.redacted
    )
