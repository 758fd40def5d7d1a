"""Policy firewall: secrets and PII that must never be stored (DESIGN.md section 2).

`scan` finds every secret in a turn with its span; the pre-filter then masks it or drops the
sentence around it, depending on the configured action for its kind. Detection is conservative
where a false positive is cheap (any 13-19 digit run that passes Luhn is treated as a card).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memwrite.reasons import SecretKind

__all__ = ["Finding", "luhn_valid", "mask", "placeholder", "scan"]


@dataclass(frozen=True, slots=True)
class Finding:
    kind: SecretKind
    start: int
    end: int


_CARD_CANDIDATE = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
_DETECTORS: tuple[tuple[SecretKind, re.Pattern[str]], ...] = (
    (
        SecretKind.PRIVATE_KEY,
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
            re.DOTALL,
        ),
    ),
    (
        SecretKind.CLOUD_KEY,
        re.compile(
            r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"  # AWS access key id
            r"|\bAIza[0-9A-Za-z_-]{35}\b"  # Google API key
            r"|(?i:aws_secret_access_key|secret[_ ]access[_ ]key)\s*[=:]?\s*[A-Za-z0-9/+=]{40}"
            r"|(?i:AccountKey)=[A-Za-z0-9/+=]{40,}"  # Azure storage connection string
        ),
    ),
    (
        SecretKind.API_TOKEN,
        re.compile(
            r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}"  # Anthropic / OpenAI
            r"|\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"  # GitHub
            r"|\bxox[abprs]-[A-Za-z0-9-]{10,}"  # Slack
            r"|\b(?:sk|rk|pk)_live_[A-Za-z0-9]{16,}"  # Stripe
            r"|\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"  # JWT
            r"|(?i:bearer)\s+[A-Za-z0-9._~+/-]{20,}=*"
        ),
    ),
    (
        SecretKind.NATIONAL_ID,
        re.compile(
            r"\b(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}\b"  # US SSN
            r"|\b[A-CEGHJ-PR-TW-Z]{2} ?\d{2} ?\d{2} ?\d{2} ?[A-D]\b"  # UK NINO
            r"|(?i:\b(?:ssn|social security (?:number|no)|passport (?:number|no)"
            r"|national id(?: number)?|tax id)\b(?: is|:|=|\s)\s*)"
            r"(?P<secret>[A-Z0-9][A-Z0-9 -]{4,18}[A-Z0-9])"
        ),
    ),
    (
        SecretKind.PASSWORD,
        re.compile(
            r"(?i:\b(?:password|passwd|passphrase|passcode|pwd|pin(?: code)?)\b"
            r"(?:\s+(?:is|was|=)|\s*[:=]))\s*(?P<secret>\S+)"
        ),
    ),
)


# Every detector above needs two adjacent digits or one of these words; most turns have none,
# so a digit search plus substring tests (C-speed, unlike a long regex alternation) skip them all.
_TWO_DIGITS = re.compile(r"\d\d")
_TRIGGER_WORDS = (
    "akia",
    "asia",
    "abia",
    "acca",
    "aiza",
    "sk-",
    "_live_",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat",
    "xox",
    "eyj",
    "bearer",
    "-----begin",
    "password",
    "passwd",
    "passphrase",
    "passcode",
    "pwd",
    "pin code",
    "pin:",
    "pin is",
    "pin was",
    "pin=",
    "pin =",
    "ssn",
    "social security",
    "passport",
    "national id",
    "tax id",
    "secret",
    "accountkey",
)


def _may_hold_secret(text: str) -> bool:
    if _TWO_DIGITS.search(text):
        return True
    lowered = text.lower()
    return any(word in lowered for word in _TRIGGER_WORDS)


def luhn_valid(digits: str) -> bool:
    """The Luhn checksum that every payment card number satisfies."""
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2 == 1:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def scan(text: str) -> list[Finding]:
    """Every secret in `text`, non-overlapping, in order of position."""
    if not _may_hold_secret(text):
        return []
    findings: list[Finding] = []
    for match in _CARD_CANDIDATE.finditer(text):
        digits = re.sub(r"\D", "", match.group())
        if 13 <= len(digits) <= 19 and luhn_valid(digits):
            findings.append(Finding(SecretKind.CARD_NUMBER, match.start(), match.end()))
    for kind, pattern in _DETECTORS:
        for match in pattern.finditer(text):
            # A keyword-led detector names the secret part, so "my SSN is X" keeps "my SSN is".
            named = "secret" in pattern.groupindex and match.group("secret") is not None
            span = match.span("secret") if named else match.span()
            findings.append(Finding(kind, *span))
    findings.sort(key=lambda finding: (finding.start, -finding.end))
    merged: list[Finding] = []
    for finding in findings:
        if merged and finding.start < merged[-1].end:
            continue  # inside an earlier, longer finding
        merged.append(finding)
    return merged


def placeholder(kind: SecretKind) -> str:
    return f"[REDACTED:{kind.value}]"


def mask(text: str, findings: list[Finding], offset: int = 0) -> str:
    """`text` (starting at `offset` of the turn) with each finding replaced by its placeholder."""
    out: list[str] = []
    cursor = 0
    for finding in findings:
        start, end = finding.start - offset, finding.end - offset
        if end <= 0 or start >= len(text):
            continue
        out.append(text[cursor : max(start, 0)])
        out.append(placeholder(finding.kind))
        cursor = min(end, len(text))
    out.append(text[cursor:])
    return "".join(out)
