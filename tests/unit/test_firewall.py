"""Policy firewall: every kind of secret is masked or blocked, and nothing else is touched."""

from __future__ import annotations

import pytest

from memwrite.config import FirewallAction, PrefilterConfig
from memwrite.firewall import luhn_valid, scan
from memwrite.models import Decision
from memwrite.prefilter import mask_secrets, screen
from memwrite.reasons import PolicyBlocked, SecretKind

PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7Zq0\nabcdefghijklmnop\n"
    "-----END RSA PRIVATE KEY-----"
)

SECRETS = [
    ("4111 1111 1111 1111", SecretKind.CARD_NUMBER),
    ("5500-0000-0000-0004", SecretKind.CARD_NUMBER),
    ("123-45-6789", SecretKind.NATIONAL_ID),
    ("AB 12 34 56 C", SecretKind.NATIONAL_ID),
    ("AKIAIOSFODNN7EXAMPLE", SecretKind.CLOUD_KEY),
    ("AIzaSyA1234567890abcdefghijklmnopqrstuv", SecretKind.CLOUD_KEY),
    ("sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345", SecretKind.API_TOKEN),
    ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", SecretKind.API_TOKEN),
    ("xoxb-1234567890-abcdefghij", SecretKind.API_TOKEN),
    (
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
        SecretKind.API_TOKEN,
    ),
]


@pytest.mark.parametrize(("secret", "kind"), SECRETS)
def test_secret_is_found_with_its_kind(secret: str, kind: SecretKind) -> None:
    # Given a secret inside ordinary text / When scanned
    text = f"here it is {secret} and that is all"
    findings = scan(text)
    # Then exactly the secret's span is reported with its kind
    assert [(f.kind, text[f.start : f.end]) for f in findings] == [(kind, secret)]


@pytest.mark.parametrize(("secret", "kind"), SECRETS)
def test_redacted_secret_never_survives_screening(secret: str, kind: SecretKind) -> None:
    # Given a fact next to a secret / When screened with defaults (these kinds redact)
    result = screen(
        f"I moved to Lisbon last spring and my code is {secret} by the way.", PrefilterConfig()
    )
    # Then the fact passes, the secret is replaced by its placeholder and reported
    assert result.text is not None
    assert secret not in result.text
    assert f"[REDACTED:{kind.value}]" in result.text
    assert kind in result.redacted


def test_luhn_rejects_ordinary_digit_runs() -> None:
    # Given a 16-digit number that fails the checksum (an order id, not a card)
    assert not luhn_valid("4111111111111112")
    assert scan("my order number is 4111 1111 1111 1112 thanks") == []


def test_dates_phone_numbers_and_versions_are_not_secrets() -> None:
    text = "On 2024-05-07 I called +1 415 555 0100 about version 3.12.1 of the app."
    assert scan(text) == []


def test_password_sentence_is_blocked_and_the_rest_kept() -> None:
    # Given a password in one sentence and a fact in another
    result = screen(
        "My password is hunter2-blue. I live in Rome with my sister.", PrefilterConfig()
    )
    # Then the password sentence is gone entirely
    assert result.text == "I live in Rome with my sister."
    assert SecretKind.PASSWORD in result.redacted


def test_turn_of_only_a_private_key_is_policy_blocked() -> None:
    # Given a turn that is a PEM private key / When screened
    result = screen(PEM, PrefilterConfig())
    # Then every sentence touching it is blocked, and the reason says so
    assert result.reason == PolicyBlocked(kind=SecretKind.PRIVATE_KEY)
    assert result.text is None


def test_private_key_blocks_every_line_it_spans() -> None:
    result = screen(
        f"I work at Northwind as a data engineer.\n{PEM}\nThat is all.", PrefilterConfig()
    )
    assert result.text == "I work at Northwind as a data engineer. That is all."


def test_action_per_kind_is_configurable() -> None:
    # Given cards configured to block instead of redact
    actions = {**PrefilterConfig().firewall_actions, SecretKind.CARD_NUMBER: FirewallAction.BLOCK}
    config = PrefilterConfig(firewall_actions=actions)
    # When a card sentence is screened / Then it is blocked with the kind as reason
    result = screen("Please charge 4111 1111 1111 1111 for the order.", config)
    assert result.reason == PolicyBlocked(kind=SecretKind.CARD_NUMBER)


def test_masked_form_hides_every_kind_for_ids() -> None:
    # Given a turn with a blocking and a redacting secret / When masked for hashing
    masked = mask_secrets("password: swordfish and card 4111111111111111")
    # Then neither secret remains
    assert "swordfish" not in masked
    assert "4111111111111111" not in masked


def test_clean_text_is_untouched() -> None:
    text = "I just finished the Arrive interview. It went well."
    result = screen(text, PrefilterConfig())
    assert result.text == text
    assert result.redacted == ()
    assert screen(text, PrefilterConfig()).reason is None
    assert Decision.PASS.value == "pass"
