"""No word lost to a clock: a pending episode keeps a year by default, and with no model to
distil it, its coming expiry is said in the episodes list, by the scheduled backfill (a metric
the alarm watches) and in `memwrite serve`'s log."""

from __future__ import annotations

import logging
import time
from contextlib import nullcontext
from datetime import UTC, datetime
from typing import Any

import pytest

import functions.backfill.handler as backfill_handler
from memwrite.adapters.in_memory import CountingMetrics
from memwrite.backfill.near_expiry import NEAR_EXPIRY_METRIC
from memwrite_local.runtime.runner import LocalContext
from memwrite_local.runtime.server import BackfillWorker
from tests.integration.conftest import Local, MakeLocal
from tests.integration.test_episodes_outage import ingest_all

DAY = 86_400


def _listed(local: Local, user_id: str = "dana") -> dict[str, Any]:
    answer = local.runner.call("GET", f"/v1/users/{user_id}/episodes")
    assert answer.status == 200, answer.body
    listed: dict[str, Any] = answer.body
    return listed


def _near(local: Local) -> tuple[dict[str, Any], CountingMetrics]:
    """The scheduled backfill's run, with its metrics counted."""
    metrics = CountingMetrics()
    deps = backfill_handler.deps()
    deps.metrics = metrics
    answer: dict[str, Any] = backfill_handler.lambda_handler({}, LocalContext())
    return answer, metrics


def test_a_pending_episode_kept_today_expires_a_year_from_now_and_raises_no_warning(
    make_local: MakeLocal,
) -> None:
    # Given no model and the default settings
    local = make_local(backend="sqlite")
    # When two turns the rules cannot distil are kept
    ingest_all(local)
    listed = _listed(local)
    # Then they are pending and expire no sooner than 365 days from now
    assert [episode["status"] for episode in listed["episodes"]] == ["pending", "pending"]
    for episode in listed["episodes"]:
        expires = datetime.fromisoformat(episode["expires_at"]).timestamp()
        assert expires >= time.time() + 365 * DAY - 60
    # And nothing warns: a year is far off
    assert listed["warnings"] == []
    answer, metrics = _near(local)
    assert answer["near_expiry"]["episodes"] == 0
    assert metrics.events[("backfill", NEAR_EXPIRY_METRIC)] == 0


@pytest.mark.parametrize("backend", ["sqlite", "moto"])
def test_pending_episodes_near_their_expiry_with_no_model_are_warned_of_everywhere(
    make_local: MakeLocal, backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Given no model and a deployment that keeps pending words only 20 days (warned 30 ahead)
    config = {"pipeline": {"episodes": {"pending_retention_days": 20}}}
    local = make_local(backend=backend, config=config)
    # When two turns are kept pending
    ingest_all(local)

    # Then the episodes list says both expire soon, whichever page is read
    (warning,) = _listed(local)["warnings"]
    assert warning["code"] == "pending_episodes_near_expiry"
    assert (warning["count"], warning["within_days"]) == (2, 30)
    earliest = datetime.fromisoformat(warning["earliest_expires_at"])
    assert abs(earliest.timestamp() - (time.time() + 20 * DAY)) < 120
    assert "no model" in warning["message"]
    one_page = local.runner.call("GET", "/v1/users/dana/episodes?limit=1").body
    assert len(one_page["episodes"]) == 1
    assert one_page["warnings"][0]["count"] == 2
    # And another user's list says nothing of them
    assert _listed(local, "someone-else")["warnings"] == []

    # And the scheduled backfill counts them in the metric the alarm watches
    answer, metrics = _near(local)
    assert answer["near_expiry"]["users"] == 1
    assert answer["near_expiry"]["episodes"] == 2
    assert metrics.events[("backfill", NEAR_EXPIRY_METRIC)] == 2

    # And `memwrite serve`'s backfill worker logs a warning
    with caplog.at_level(logging.WARNING, logger="memwrite_local.runtime.server"):
        BackfillWorker(local.runner, nullcontext())._work()
    assert any("2 pending episodes" in record.getMessage() for record in caplog.records)


def test_a_tenant_may_keep_pending_words_for_less_time(make_local: MakeLocal) -> None:
    # Given a tenant whose settings keep pending words 5 days
    local = make_local(backend="sqlite", api_keys={"k1": "t1"})
    settings = {"pending_retention_days": 5}
    assert local.runner.call("PUT", "/v1/settings", settings, api_key="k1").status == 200
    # When a turn is kept pending for that tenant
    for body in ({"user_id": "ana", "session_id": "s", "turns": _turns()},):
        assert local.runner.call("POST", "/v1/turns", body, api_key="k1").status == 202
    local.runner.drain()
    # Then it expires 5 days on, and the list warns of it
    listed = local.runner.call("GET", "/v1/users/ana/episodes", api_key="k1").body
    (episode,) = listed["episodes"]
    expires = datetime.fromisoformat(episode["expires_at"]).timestamp()
    assert abs(expires - (time.time() + 5 * DAY)) < 120
    assert listed["warnings"][0]["count"] == 1


def _turns() -> list[dict[str, Any]]:
    at = datetime(2025, 3, 14, 10, tzinfo=UTC).isoformat()
    text = "Since last month Lisbon has been home, and cilantro ruins every dish for me."
    return [{"role": "user", "content": text, "timestamp": at}]
