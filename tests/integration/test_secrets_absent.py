"""The policy firewall: no secret a user typed reaches any sink the write path touches.

Sinks: SQS message bodies, every DynamoDB item, HTTP response bodies, stdout/stderr, log
records, and the EMF metric lines (metrics switched on for this test so they are printed).
"""

from __future__ import annotations

import io
import json
import logging

import pytest
from aws_lambda_powertools.logging.logger import set_package_logger

CARD = "4111 1111 1111 1111"
SSN = "078-05-1120"
AWS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"
ANTHROPIC_TOKEN = "sk-ant-api03-Zq8vX2mKp4LrT9wYb6NcHs3Df7GjQe5Ua1Io0"
PEM_BODY = "MIIEowIBAAKCAQEAx4UbaDzY9Wq2Q0mWgBoDyZf8tLkR3vNcPe7Jh2Gs"
PEM = f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----"
PASSWORD = "Tr0ub4dor-X9"
SHORT_PASSWORD = "hunter2-blue"
AWS_SECRET = "Qv3xN8pLm2Rt7Yw4Kz9Bc6Hd1Fg5Js0Ae8Ui3Oo2"
WIFI_PASSWORD = "kettle-Moon-42"
DSN_PASSWORD = "pg-Secr3t-77"
BASIC_AUTH = "YWxpY2U6czNjcjN0"
ENV_TOKEN = "rk_test_51Hx9Qq"
EMAIL = "lena.ortiz@fastmail.example"
IBAN = "GB82 WEST 1234 5698 7654 32"
PHONE = "+44 7700 900123"

# Each secret in the shapes it could leak as (with and without separators).
SECRET_STRINGS = (
    CARD,
    CARD.replace(" ", ""),
    SSN,
    SSN.replace("-", ""),
    AWS_KEY_ID,
    ANTHROPIC_TOKEN,
    "api03-Zq8vX2mKp4LrT9wYb6NcHs3Df7GjQe5Ua1Io0",
    PEM_BODY,
    "BEGIN RSA PRIVATE KEY",
    PASSWORD,
    SHORT_PASSWORD,
    AWS_SECRET,
    WIFI_PASSWORD,
    DSN_PASSWORD,
    BASIC_AUTH,
    ENV_TOKEN,
    EMAIL,
    IBAN,
    IBAN.replace(" ", ""),
    PHONE,
    "7700 900123",
    "5698 7654",
    "1111 1111",
    "1111.1111",
    "05 1120",
)

SECRET_TURNS = (
    f"Please charge my card {CARD} for the Lisbon trip.",
    f"My social security number is {SSN} and I was born in Ohio.",
    f"Our deploy user has key {AWS_KEY_ID} in the staging account.",
    f"I rotated the token {ANTHROPIC_TOKEN} yesterday at work.",
    f"Here is the deploy key.\n{PEM}\nI keep the backup on my laptop.",
    f"By the way my password is {PASSWORD}. I live in Porto with my sister.",
    f"my password is {SHORT_PASSWORD} so remember it",
)

# The same kinds written the ways that slipped past earlier versions, plus PII.
EVASIVE_TURNS = (
    f"The CI user is {AWS_KEY_ID} and its secret is {AWS_SECRET}, I set it up on Monday.",
    f"The password for the office wi-fi is {WIFI_PASSWORD}. I sit near the window.",
    f"Our analytics db is postgres://report:{DSN_PASSWORD}@db.internal:5432/bi since May.",
    f"I call the API with Authorization: Basic {BASIC_AUTH} from my laptop.",
    f"My .env has PAYMENTS_SECRET_KEY={ENV_TOKEN} for the side project.",
    "I paid with 4111\u00a01111\u00a01111\u00a01111 and 4111.1111.1111.1111 this week.",
    "My SSN is 078\u201305\u20131120, I was born in Ohio.",
    f"My p\u0430ssword is {PASSWORD} on the new laptop. I work in Leeds.",
    f"Write to {EMAIL} or call {PHONE}; my salary goes to {IBAN}.",
)


def _leaks(sink: str) -> list[str]:
    return [secret for secret in SECRET_STRINGS if secret in sink]


# Powertools' package logger ("aws_lambda_powertools.*") does not propagate and has only a
# NullHandler unless POWERTOOLS_DEBUG is set, so its records never reach the Lambda log stream;
# pytest's caplog sees them anyway. They are covered by the POWERTOOLS_DEBUG test below.
_DISCARDED_IN_LAMBDA = "aws_lambda_powertools"


def _logged(records: list[logging.LogRecord]) -> str:
    return "\n".join(
        f"{record.getMessage()} {record.__dict__!r}"
        for record in records
        if not record.name.startswith(_DISCARDED_IN_LAMBDA)
    )


@pytest.fixture
def metrics_on(make_local):
    """A deployment with EMF metrics printed to stdout, as in Lambda."""
    return make_local(env={"POWERTOOLS_METRICS_DISABLED": "false"})


@pytest.mark.parametrize("turns", [SECRET_TURNS, EVASIVE_TURNS], ids=["plain", "evasive"])
def test_secrets_are_absent_from_every_sink(turns, metrics_on, make_body, capsys, caplog):
    # Given turns carrying a card number, an SSN, an AWS key id, an API token, a private key
    # and passwords, and every log record captured (library and SDK debug logs included)
    caplog.set_level(logging.DEBUG)
    local = metrics_on
    body = make_body(*turns, session_id="secrets-1", user_id="dana")

    # When they are posted, the pipeline consumes the queue, the trace is read, and an invalid
    # request carries the same turns
    posted = local.post_turns(body)
    queued = local.peek_bodies()
    local.runner.drain()
    trace = local.get_trace(posted.body["trace_id"])
    invalid = local.post_turns(make_body(*turns, session_id="bad session id"))

    # Then the calls behave as usual
    assert posted.status == 202
    assert trace.status == 200
    assert invalid.status == 400
    items = local.table_items()
    captured = capsys.readouterr()
    records = _logged(caplog.records)
    emf_lines = [line for line in captured.out.splitlines() if '"_aws"' in line]

    # And every sink was really observed (an empty sink would make this test vacuous)
    assert len(queued) == posted.body["accepted"] >= 5
    assert {span["stage"] for span in trace.body["spans"]} > {"pre_filter"}  # later stages ran
    assert any(rows for rows in items.values())
    assert any('"Stage":"pre_filter"' in line for line in emf_lines)
    assert "MessageBody" in records  # the SDK's own debug log of the SendMessageBatch call

    # And no secret appears in any of them
    assert _leaks(json.dumps(queued)) == []
    assert _leaks(json.dumps(items)) == []
    assert _leaks(json.dumps(posted.body)) == []
    assert _leaks(json.dumps(trace.body)) == []
    assert _leaks(json.dumps(invalid.body)) == []
    assert _leaks("\n".join(emf_lines)) == []
    assert _leaks(captured.out) == []
    assert _leaks(captured.err) == []
    assert _leaks(records) == []


def test_survivors_carry_typed_placeholders_and_the_trace_names_what_was_removed(local, make_body):
    # Given the same secret-bearing turns
    body = make_body(*SECRET_TURNS, session_id="secrets-2", user_id="dana")

    # When they are posted
    posted = local.post_turns(body)

    # Then redactable secrets are replaced by typed placeholders and the rest of the sentence
    # is kept; sentences holding a private key or a password are dropped entirely
    texts = sorted(m["text"] for m in local.take_bodies())
    assert texts == sorted(
        [
            "Please charge my card [REDACTED:card_number] for the Lisbon trip.",
            "My social security number is [REDACTED:national_id] and I was born in Ohio.",
            "Our deploy user has key [REDACTED:cloud_key] in the staging account.",
            "I rotated the token [REDACTED:api_token] yesterday at work.",
            "Here is the deploy key. I keep the backup on my laptop.",
            "I live in Porto with my sister.",
        ]
    )
    # And a turn that was nothing but a password sentence is skipped with a typed reason
    assert posted.body["skipped"] == [
        {
            "turn_id": posted.body["turn_ids"][6],
            "reason": {"type": "PolicyBlocked", "kind": "password"},
        }
    ]
    # And the trace tells, per turn, which kinds of secret were masked or dropped
    spans = local.get_trace(posted.body["trace_id"]).body["spans"]
    kinds = {
        span["item_id"]: tuple(span["reason"]["kinds"])
        for span in spans
        if span["result"] == "transform"
    }
    ids = posted.body["turn_ids"]
    assert kinds == {
        ids[0]: ("card_number",),
        ids[1]: ("national_id",),
        ids[2]: ("cloud_key",),
        ids[3]: ("api_token",),
        ids[4]: ("private_key",),
        ids[5]: ("password",),
    }


def test_disabled_metrics_print_nothing(local, make_body, capsys):
    # Given the default local deployment, where LocalAws disables metrics
    capsys.readouterr()

    # When turns are posted
    assert local.post_turns(make_body("I live in Berlin with my partner Alex.")).status == 202

    # Then no EMF line floods stdout (memwrite demo prints ~40 of them before the funnel)
    assert '"_aws"' not in capsys.readouterr().out


def test_form_encoded_body_is_not_echoed_back(local, make_body):
    # Given secret-bearing turns posted the way `curl -d` does, as a form content type
    raw = json.dumps(make_body(*SECRET_TURNS, session_id="secrets-4"))
    headers = {"Content-Type": "application/x-www-form-urlencoded"}

    # When the API answers
    response = local.post_turns(raw, headers=headers)

    # Then whatever the verdict, the response does not repeat the secrets
    assert response.status < 500
    assert _leaks(json.dumps(response.body)) == []


@pytest.fixture
def powertools_debug_log():
    """Powertools' package debug log switched on (what POWERTOOLS_DEBUG=true does), captured."""
    package = logging.getLogger(_DISCARDED_IN_LAMBDA)
    saved = (package.level, package.propagate, list(package.handlers))
    stream = io.StringIO()
    set_package_logger(stream=stream)
    yield stream
    package.setLevel(saved[0])
    package.propagate = saved[1]
    package.handlers[:] = saved[2]


def test_secrets_stay_out_of_the_powertools_debug_log(local, make_body, powertools_debug_log):
    # Given an operator who turned on Powertools' debug log to chase an incident
    body = make_body(*SECRET_TURNS, session_id="secrets-3", user_id="dana")

    # When secret-bearing turns are posted
    assert local.post_turns(body).status == 202

    # Then the debug log (which Lambda ships to CloudWatch Logs) holds none of the secrets
    logged = powertools_debug_log.getvalue()
    assert "aws_lambda_powertools.event_handler" in logged  # the debug log is really on
    assert _leaks(logged) == []
