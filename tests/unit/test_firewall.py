"""Policy firewall: every kind of secret is masked or blocked, and nothing else is touched."""

from __future__ import annotations

import pytest

from memwrite.config.settings import FirewallAction, PreFilterConfig
from memwrite.models import Decision
from memwrite.pre_filter.checks import mask_secrets, screen
from memwrite.pre_filter.firewall import iban_valid, luhn_valid, normalise, scan
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
        f"I moved to Lisbon last spring and my code is {secret} by the way.", PreFilterConfig()
    )
    # Then the fact passes, the secret is replaced by its placeholder and reported
    assert result.text is not None
    assert secret not in result.text
    assert f"[REDACTED:{kind.value}]" in result.text
    assert kind in result.redacted


def test_luhn_rejects_ordinary_digit_runs() -> None:
    # Given a 16-digit number that fails the checksum (an order id, not a card)
    assert not luhn_valid("4111111111111112")
    assert scan("my order number is 4111 1111 1111 1112 thanks") == ()


def test_dates_versions_addresses_and_commit_ids_are_not_secrets() -> None:
    text = (
        "On 2024-05-07 I upgraded to version 3.12.1, moved the box to 10.0.12.254 and pushed "
        "commit 9fceb02d0ae598e95dc970b74767f19372d61af8; the token is expired anyway."
    )
    assert scan(text) == ()


def test_words_that_contain_a_secret_word_are_not_secrets() -> None:
    text = "We went shopping, passed the monkey house, and I was pinning photos: all fine."
    assert scan(text) == ()
    assert screen(text, PreFilterConfig()).text == text


def test_password_sentence_is_blocked_and_the_rest_kept() -> None:
    # Given a password in one sentence and a fact in another
    result = screen(
        "My password is hunter2-blue. I live in Rome with my sister.", PreFilterConfig()
    )
    # Then the password sentence is gone entirely
    assert result.text == "I live in Rome with my sister."
    assert SecretKind.PASSWORD in result.redacted


def test_turn_of_only_a_private_key_is_policy_blocked() -> None:
    # Given a turn that is a PEM private key / When screened
    result = screen(PEM, PreFilterConfig())
    # Then every sentence touching it is blocked, and the reason says so
    assert result.reason == PolicyBlocked(kind=SecretKind.PRIVATE_KEY)
    assert result.text is None


def test_private_key_blocks_every_line_it_spans() -> None:
    result = screen(
        f"I work at Northwind as a data engineer.\n{PEM}\nThat is all.", PreFilterConfig()
    )
    assert result.text == "I work at Northwind as a data engineer. That is all."


def test_action_per_kind_is_configurable() -> None:
    # Given cards configured to block instead of redact
    actions = {**PreFilterConfig().firewall_actions, SecretKind.CARD_NUMBER: FirewallAction.BLOCK}
    config = PreFilterConfig(firewall_actions=actions)
    # When a card sentence is screened / Then it is blocked with the kind as reason
    result = screen("Please charge 4111 1111 1111 1111 for the order.", config)
    assert result.reason == PolicyBlocked(kind=SecretKind.CARD_NUMBER)


def test_masked_form_hides_every_kind_for_ids() -> None:
    # Given a turn with a blocking and a redacting secret / When masked for hashing
    masked = mask_secrets("password: swordfish and card 4111111111111111")
    # Then neither secret remains
    assert "swordfish" not in masked
    assert "4111111111111111" not in masked


@pytest.mark.parametrize(
    "turn",
    [
        "My password is hunter2-blue. I live in Rome with my sister.",
        "I moved to Lisbon last spring and my card is 4111 1111 1111 1111 by the way.",
        f"I work at Northwind as a data engineer.\n{PEM}\nThat is all.",
        "Reach me at dana@example.com, I am usually online after 6.",
    ],
)
def test_masked_text_screens_as_the_original_and_masks_to_itself(turn: str) -> None:
    # Given a turn as a trace keeps it for replay: masked
    masked = mask_secrets(turn)
    # When the masked text is screened again / Then it gets the original's verdict and text
    again, first = screen(masked, PreFilterConfig()), screen(turn, PreFilterConfig())
    assert (again.reason, again.text, again.redacted) == (first.reason, first.text, first.redacted)
    # And masking it again changes nothing (its turn id is the original's)
    assert mask_secrets(masked) == masked


def test_clean_text_is_untouched() -> None:
    text = "I just finished the Arrive interview. It went well."
    result = screen(text, PreFilterConfig())
    assert result.text == text
    assert result.redacted == ()
    assert screen(text, PreFilterConfig()).reason is None
    assert Decision.PASS.value == "pass"


# Secrets as people type them in chat, and the part that must disappear.
SECRETS_IN_PROSE = [
    (
        "the key pair is AKIAJ7Q2EXAMPLE4ZZ9Q with secret Qv3xN8pLm2Rt7Yw4Kz9Bc6Hd1Fg5Js0Ae8Ui3Oo2",
        "Qv3xN8pLm2Rt7Yw4Kz9Bc6Hd1Fg5Js0Ae8Ui3Oo2",
        SecretKind.CLOUD_KEY,
    ),
    ("my api key is live9Xq77abZ2", "live9Xq77abZ2", SecretKind.API_TOKEN),
    ("curl with Authorization: Basic YWxpY2U6czNjcjN0", "YWxpY2U6czNjcjN0", SecretKind.API_TOKEN),
    ("just send x-api-key: 7f3Kq9ZpLw2 in the header", "7f3Kq9ZpLw2", SecretKind.API_TOKEN),
    ("put STRIPE_SECRET_KEY=rk_test_51Hx9 in your .env", "rk_test_51Hx9", SecretKind.API_TOKEN),
    ("mail me at lena.ortiz@fastmail.example", "lena.ortiz@fastmail.example", SecretKind.EMAIL),
    ("pay GB82 WEST 1234 5698 7654 32 monthly", "GB82 WEST 1234 5698 7654 32", SecretKind.IBAN),
    ("text me on +44 7700 900123 after six", "+44 7700 900123", SecretKind.PHONE),
    ("my cell is (415) 555-0134 if it is urgent", "(415) 555-0134", SecretKind.PHONE),
    # a bare AWS secret key: no word names it and no two digits stand together
    (
        "use Qv3xN8pLm2Rt7Yw4Kz9Bc6Hd1Fg5Js0Ae8Ui3Oo2 tonight",
        "Qv3xN8pLm2Rt7Yw4Kz9Bc6Hd1Fg5Js0Ae8Ui3Oo2",
        SecretKind.CLOUD_KEY,
    ),
]


@pytest.mark.parametrize(("text", "secret", "kind"), SECRETS_IN_PROSE)
def test_secret_written_in_prose_is_masked(text: str, secret: str, kind: SecretKind) -> None:
    # Given a secret or PII written inside a chat sentence / When screened with defaults
    result = screen(f"I work from Leeds these days. And {text}.", PreFilterConfig())
    # Then the first sentence is kept and the value is replaced by its typed placeholder
    assert result.text is not None
    assert result.text.startswith("I work from Leeds these days.")
    assert secret not in result.text
    assert f"[REDACTED:{kind.value}]" in result.text


PASSWORD_PHRASINGS = [
    "my password for the netflix account is popcorn77",
    "pw is popcorn77",
    "the wifi password's popcorn77",
    "Password: popcorn77",
    "I changed my bank password to popcorn77",
    "the staging db is postgres://admin:popcorn77@db.internal:5432/app",
    "my p\u0430ssword is popcorn77",  # Cyrillic a
    "my pass\u200bword is popcorn77",  # zero-width space inside the word
    "my P\u0130N is tulip",  # Turkish dotted capital I
]


@pytest.mark.parametrize("phrasing", PASSWORD_PHRASINGS)
def test_password_phrasings_block_their_sentence(phrasing: str) -> None:
    # Given a password in one of the ways people give it, next to a fact
    result = screen(f"{phrasing}. I live in Rome with my sister.", PreFilterConfig())
    # Then only the fact survives and the reason names the password
    assert result.text == "I live in Rome with my sister."
    assert SecretKind.PASSWORD in result.redacted


EVASIVE_NUMBERS = [
    ("4111\u00a01111\u00a01111\u00a01111", SecretKind.CARD_NUMBER),  # non-breaking spaces
    ("4111.1111.1111.1111", SecretKind.CARD_NUMBER),
    ("4111/1111/1111/1111", SecretKind.CARD_NUMBER),
    ("4111  1111  1111  1111", SecretKind.CARD_NUMBER),  # double spaces
    ("41\u200b11 11\u200c11 1111 1111", SecretKind.CARD_NUMBER),  # zero-width characters
    ("\uff14\uff11\uff11\uff11 1111 1111 1111", SecretKind.CARD_NUMBER),  # full-width digits
    ("4 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1", SecretKind.CARD_NUMBER),  # no two digits together
    ("078 05 1120", SecretKind.NATIONAL_ID),  # SSN with spaces
    ("078\u201305\u20131120", SecretKind.NATIONAL_ID),  # SSN with en-dashes
]


@pytest.mark.parametrize(("written", "kind"), EVASIVE_NUMBERS)
def test_numbers_with_odd_separators_are_still_found(written: str, kind: SecretKind) -> None:
    # Given a card or SSN typed with separators meant to slip past a pattern
    result = screen(f"Use {written} for the booking, I trust you.", PreFilterConfig())
    # Then no run of its digits survives
    assert result.text is not None
    assert "1111" not in result.text and "1120" not in result.text
    assert f"[REDACTED:{kind.value}]" in result.text


def test_normalise_keeps_ordinary_unicode_and_removes_invisible_characters() -> None:
    # Given accented prose with a zero-width joiner and a full-width digit
    text = "Jos\u00e9 moved to M\u00e1laga in \uff12020\u200d."
    # When normalised / Then the letters stay and the invisible character is gone
    assert normalise(text) == "Jos\u00e9 moved to M\u00e1laga in 2020."


def test_iban_needs_a_valid_checksum() -> None:
    assert iban_valid("DE89 3704 0044 0532 0130 00")
    assert not iban_valid("DE88 3704 0044 0532 0130 00")


def test_tenant_can_allow_pii_but_secrets_stay_masked() -> None:
    # Given a tenant that allows e-mail addresses and phone numbers
    config = PreFilterConfig(allowed_pii=frozenset({SecretKind.EMAIL, SecretKind.PHONE}))
    # When a turn with an e-mail, a phone number and a card is screened
    result = screen(
        "Reach me at sam@example.org or +1 212 555 0199, card 4111 1111 1111 1111.", config
    )
    # Then the allowed PII stays, the card does not
    assert result.text == (
        "Reach me at sam@example.org or +1 212 555 0199, card [REDACTED:card_number]."
    )
    assert result.redacted == (SecretKind.CARD_NUMBER,)


def test_secret_kinds_cannot_be_allowed() -> None:
    # Given a configuration that tries to let passwords through / Then it is refused
    with pytest.raises(ValueError, match="only PII kinds"):
        PreFilterConfig(allowed_pii=frozenset({SecretKind.PASSWORD}))
