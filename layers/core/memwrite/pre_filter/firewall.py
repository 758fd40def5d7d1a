"""Policy firewall: secrets and PII that must never be stored (docs/design.md §1).

`normalise` gives the form every later step sees (NFKC, no zero-width characters), and `scan`
finds every secret in it with its span, matching on a look-alike-folded copy so that a Cyrillic
"а" or an en-dash cannot hide a secret. The pre-filter then masks a finding or drops the
sentence around it, depending on the configured action for its kind. Detection is conservative
where a false positive is cheap (any 13-19 digit run that passes Luhn is treated as a card).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from memwrite.pre_filter.patterns import by_first_char
from memwrite.reasons import SecretKind

__all__ = ["Finding", "luhn_valid", "mask", "normalise", "placeholder", "scan"]


@dataclass(frozen=True, slots=True)
class Finding:
    kind: SecretKind
    start: int
    end: int


# Invisible characters that split a token without showing: zero-width space/joiners, word
# joiner, BOM, soft hyphen, Mongolian vowel separator, invisible operators.
_INVISIBLE = dict.fromkeys(
    map(ord, "\u200b\u200c\u200d\u200e\u200f\u2060\u2061\u2062\u2063\u2064\ufeff\u00ad\u180e")
)

# Look-alikes folded one character to one character, so offsets in the folded copy are offsets
# in the normalised text. A small explicit table instead of Unicode's confusables.txt: its
# skeletons are not one-to-one ("rn" -> "m") and fold digits into letters ("0" -> "O"), which
# would break the digit detectors; the letters below are those that spell our trigger words.
_LOOKALIKES = str.maketrans(
    {
        # Cyrillic
        "а": "a", "в": "b", "е": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p",
        "с": "c", "т": "t", "у": "y", "х": "x", "ѕ": "s", "і": "i", "ј": "j", "ԁ": "d",
        "ԛ": "q", "ԝ": "w", "һ": "h", "ү": "y", "ӏ": "l",
        "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P",
        "С": "C", "Т": "T", "У": "Y", "Х": "X", "Ѕ": "S", "І": "I", "Ј": "J", "Ԁ": "D",
        # Greek
        "α": "a", "ο": "o", "ρ": "p", "ν": "v", "ι": "i", "κ": "k", "τ": "t", "υ": "u",
        "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M",
        "Ν": "N", "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X",
        # Latin look-alikes that NFKC keeps ("İ" also because its lower case is two characters)
        "ı": "i", "ɑ": "a", "ɡ": "g", "ʟ": "L", "İ": "I",
        # Dashes, slashes and dots used as separators inside numbers
        "‐": "-", "‑": "-", "‒": "-", "–": "-", "—": "-", "―": "-", "−": "-",
        "⁄": "/", "∕": "/", "·": ".", "․": ".",
    }
)  # fmt: skip


def normalise(text: str) -> str:
    """NFKC with invisible characters removed: the text the pre-filter keeps and scans."""
    if text.isascii():
        return text  # the common case: nothing to compose, nothing invisible
    return unicodedata.normalize("NFKC", text).translate(_INVISIBLE)


# Separators people put between the digit groups of a card: space (also a double one), dash,
# dot, slash. Non-breaking and zero-width spaces are already gone after `normalise`.
_CARD_CANDIDATE = re.compile(r"(?<![\d-])\d(?:(?:[ ./-]| {2})?\d){12,18}(?![\d-])")
_IBAN_CANDIDATE = re.compile(
    r"\b[A-Z]{2}\d{2}(?:[A-Z0-9]{11,30}|(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?)\b"
)
# A phone number: an international prefix or an area code in brackets, or a 3-3-4 grouping.
_PHONE = re.compile(
    r"(?<![\w+])(?:\+\d{1,3}[ .-]?(?:\(\d{1,4}\)[ .-]?)?\d{1,4}(?:[ .-]?\d{2,4}){1,4}"
    r"|\(\d{2,4}\)[ .-]?\d{2,4}(?:[ .-]?\d{2,4}){1,3}"
    r"|\d{3}[ .-]\d{3}[ .-]\d{4})(?![\w])"
)
_PASSWORD_WORD = r"(?:password|passwd|passphrase|passcode|pwd|pw|pin(?: ?code)?|wi-?fi key)"
_TOKEN_WORD = (
    r"(?:api[ _-]?key|access[ _-]?key|secret(?:[ _-]?key)?|client[ _-]secret|auth[ _-]?token"
    r"|access[ _-]?token|token)"
)
# "for my bank account", "to the wifi", "on gmail": what the password opens, 1-3 words.
_TARGET = r"(?:\s+(?:for|to|of|on|at)(?:\s+[^\s:=]+){1,3}?)?"
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
            r"|(?i:AccountKey)=[A-Za-z0-9/+=]{40,}"  # Azure storage connection string
            # An AWS secret access key: 40 characters of mixed case and digits, standing alone
            # (a git SHA is lowercase hex, so it never qualifies).
            r"|(?<![A-Za-z0-9/+=])(?=[A-Za-z0-9/+]*[A-Z])(?=[A-Za-z0-9/+]*[a-z])"
            r"(?=[A-Za-z0-9/+]*\d)[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
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
            # HTTP headers that carry a credential
            r"|(?i:\b(?:proxy-)?authorization\s*:\s*(?:(?:basic|bearer|token|digest|apikey)\s+)?)"
            r"(?P<header>[^\s,;]{6,})"
            r"|(?i:\b(?:x-api-key|api-key|x-auth-token)\s*:\s*)(?P<keyheader>[^\s,;]{6,})"
            # .env lines: an upper-case variable named like a credential
            r"|\b[A-Z][A-Z0-9_]*(?:KEY|SECRET|TOKEN|PASSWORD|PASSWD|PWD|PASS)[A-Z0-9_]*\s*=\s*"
            r"[\"']?(?P<env>[^\s\"']+)"
            # "my api key is …": a value with a digit, at least 8 characters
            rf"|(?i:\b{_TOKEN_WORD}\b{_TARGET}(?:\s+(?:is|was)|\s*[:=]))\s*[\"']?"
            r"(?P<named>(?=[^\s\"']*\d)[^\s\"']{7,}[^\s\"'.,;:!?)])"
        ),
    ),
    (
        SecretKind.NATIONAL_ID,
        re.compile(
            r"\b(?!000|666|9\d\d)\d{3}([- ])(?!00)\d{2}\1(?!0000)\d{4}\b"  # US SSN
            r"|\b[A-CEGHJ-PR-TW-Z]{2} ?\d{2} ?\d{2} ?\d{2} ?[A-D]\b"  # UK NINO
            r"|(?i:\b(?:ssn|social security (?:number|no)|passport (?:number|no)"
            r"|national id(?: number)?|tax id)\b(?: is|:|=|\s)\s*)"
            r"(?P<secret>[A-Z0-9][A-Z0-9 -]{4,18}[A-Z0-9])"
        ),
    ),
    (
        SecretKind.PASSWORD,
        re.compile(
            # "password is …", "pw: …", "my password for the bank is …", "password's …"
            rf"(?i:\b{_PASSWORD_WORD}\b{_TARGET}(?:\s+(?:is|was|=|would be|will be)|'s|\s*[:=]))"
            r"\s*[\"']?(?P<secret>[^\s\"']+)"
            # "changed my password to …"
            rf"|(?i:\b(?:chang|set|reset|updat)\w*\s+(?:my|the|our)\s+(?:\w+\s+)?{_PASSWORD_WORD}"
            r"\s+to)\s*[\"']?(?P<newpassword>[^\s\"']+)"
            # credentials inside a connection string: scheme://user:password@host (both masked)
            r"|\b[a-zA-Z][a-zA-Z0-9+.-]{1,20}://(?P<dsn>[^\s:/@]+:[^\s@/]+)@"
        ),
    ),
    (
        SecretKind.EMAIL,
        re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"),
    ),
)
_SECRET_GROUPS = ("secret", "header", "keyheader", "env", "named", "newpassword", "dsn")


# Cheap gate first: every word-led detector needs one of these (after folding); most turns
# have none, and one search grouped by first character skips them all.
_TRIGGER_WORDS = (
    "akia", "asia", "abia", "acca", "aiza", "sk-", "_live_", "ghp_", "gho_", "ghu_", "ghs_",
    "ghr_", "github_pat", "xox", "eyj", "bearer", "-----begin", "pass", "pwd", "pw", "pin",
    "wifi key", "wi-fi key", "ssn", "social security", "national id", "tax id", "secret",
    "accountkey", "key", "token", "authorization", "://", "@",
)  # fmt: skip


# Both searched in the lower-cased text (cheaper than IGNORECASE).
_MAY_NAME_SECRET = re.compile(by_first_char(_TRIGGER_WORDS))
# Then the words as the detectors need them, so "shopping", "passed" and "monkey" run none.
_NAMES_SECRET = re.compile(
    r"-----begin|akia|asia|abia|acca|aiza|sk-|gh[pousr]_|github_pat|xox|_live_|eyj|bearer"
    r"|authorization|://|@|(?:key|secret|token|pass|pwd)[a-z0-9_]*\s*="  # .env lines
    rf"|\b(?:{_TOKEN_WORD}|{_PASSWORD_WORD}|ssn|social security|passport|national id|tax id)\b"
)
_DIGIT = re.compile(r"\d")
# Without a secret's word only these can match: numbers (cards, IBANs, phones, SSNs, NINOs)
# and bare keys (an AWS secret access key has no word before it).
_NUMERIC_DETECTORS = tuple(
    (kind, pattern)
    for kind, pattern in _DETECTORS
    if kind in (SecretKind.CLOUD_KEY, SecretKind.NATIONAL_ID)
)


def luhn_valid(digits: str) -> bool:
    """The Luhn checksum that every payment card number satisfies."""
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2 == 1:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def iban_valid(candidate: str) -> bool:
    """ISO 13616: move the first four characters to the end, letters to numbers, mod 97 == 1."""
    compact = candidate.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(char, 36)) for char in rearranged)) % 97 == 1


def _checked_findings(folded: str) -> list[Finding]:
    """Cards, IBANs and phone numbers: shapes that need a checksum or a digit count."""
    findings: list[Finding] = []
    for match in _CARD_CANDIDATE.finditer(folded):
        digits = re.sub(r"\D", "", match.group())
        if 13 <= len(digits) <= 19 and luhn_valid(digits):
            findings.append(Finding(SecretKind.CARD_NUMBER, match.start(), match.end()))
    for match in _IBAN_CANDIDATE.finditer(folded):
        if iban_valid(match.group()):
            findings.append(Finding(SecretKind.IBAN, match.start(), match.end()))
    for match in _PHONE.finditer(folded):
        if 9 <= sum(char.isdigit() for char in match.group()) <= 15:
            findings.append(Finding(SecretKind.PHONE, match.start(), match.end()))
    return findings


def _has_digit(text: str) -> bool:
    if text.isascii():
        # Ten substring searches (memchr in C) take a fifth of one regex pass over the text.
        return any(digit in text for digit in "0123456789")
    return _DIGIT.search(text) is not None


# A placeholder `mask` wrote is a finding of its kind: text screened again after masking (a
# trace's stored inputs, replayed) gets the verdict the secret got, and masks to itself.
_PLACEHOLDER_START = "[REDACTED:"
_PLACEHOLDER = re.compile(
    re.escape(_PLACEHOLDER_START) + "(" + "|".join(kind.value for kind in SecretKind) + r")\]"
)


@lru_cache(maxsize=8)
def scan(text: str) -> tuple[Finding, ...]:
    """Every secret in `text` (already `normalise`d), non-overlapping, in order of position.

    Cached for the few texts of the turn at hand (the turn id, the screening and a short
    answer's question scan the same text); kept small so raw turns do not linger in memory."""
    folded = text if text.isascii() else text.translate(_LOOKALIKES)
    lowered = folded.lower()
    named = _MAY_NAME_SECRET.search(lowered) is not None and bool(_NAMES_SECRET.search(lowered))
    numeric = _has_digit(folded)
    masked = _PLACEHOLDER_START in folded
    if not named and not numeric and not masked:
        return ()  # the common case: no detector can match
    findings = _checked_findings(folded) if numeric else []
    if masked:
        findings.extend(
            Finding(SecretKind(match.group(1)), match.start(), match.end())
            for match in _PLACEHOLDER.finditer(folded)
        )
    for kind, pattern in _DETECTORS if named else _NUMERIC_DETECTORS:
        for match in pattern.finditer(folded):
            # A keyword-led detector names the secret part, so "my SSN is X" keeps "my SSN is".
            group = next(
                (g for g in _SECRET_GROUPS if g in pattern.groupindex and match.group(g)), None
            )
            span = match.span(group) if group else match.span()
            findings.append(Finding(kind, *span))
    findings.sort(key=lambda finding: (finding.start, -finding.end))
    merged: list[Finding] = []
    for finding in findings:
        if merged and finding.start < merged[-1].end:
            continue  # inside an earlier, longer finding
        merged.append(finding)
    return tuple(merged)


def placeholder(kind: SecretKind) -> str:
    return f"[REDACTED:{kind.value}]"


# A secret read up to whitespace ("my password is hunter2. I live ...") may end with the
# sentence's full stop: it stays after the placeholder, so masked text splits into the same
# sentences (a trace's masked inputs are screened again by replay).
_SENTENCE_END = ".?!…"


def _without_sentence_end(text: str, start: int, end: int) -> int:
    """`end`, less a final sentence mark that whitespace or the end of `text` follows."""
    if (
        end - start > 1
        and text[end - 1] in _SENTENCE_END
        and (end == len(text) or text[end].isspace())
    ):
        return end - 1
    return end


def mask(text: str, findings: Sequence[Finding], offset: int = 0) -> str:
    """`text` (starting at `offset` of the turn) with each finding replaced by its placeholder."""
    out: list[str] = []
    cursor = 0
    for finding in findings:
        start, end = finding.start - offset, finding.end - offset
        if 0 < end <= len(text):
            end = _without_sentence_end(text, max(start, 0), end)
        if end <= 0 or start >= len(text):
            continue
        out.append(text[cursor : max(start, 0)])
        out.append(placeholder(finding.kind))
        cursor = min(end, len(text))
    out.append(text[cursor:])
    return "".join(out)
