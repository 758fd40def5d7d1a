"""How a batch-lane round learns its open batches' states from the Message Batches API: one
listing of a page the size of the open batches while they are the newest, a bounded read of a
busy workspace's history, and a retrieve for one the listing does not show. Through the real
`anthropic` client over a mock transport."""

from __future__ import annotations

from typing import Any

import httpx2

from memwrite.adapters.anthropic.batches import AnthropicMessageBatches
from memwrite.backfill.ports import BatchState
from memwrite.config.settings import ExtractConfig


def _batch(batch_id: str, status: str = "in_progress") -> dict[str, Any]:
    return {
        "id": batch_id,
        "type": "message_batch",
        "processing_status": status,
        "request_counts": {
            "processing": 1,
            "succeeded": 0,
            "errored": 0,
            "canceled": 0,
            "expired": 0,
        },
        "created_at": "2026-11-27T18:00:00Z",
        "expires_at": "2026-11-28T18:00:00Z",
        "ended_at": None,
        "archived_at": None,
        "cancel_initiated_at": None,
        "results_url": None,
    }


class Workspace:
    """A workspace's batches, newest first, listed `limit` a page (the API's default 20;
    `after_id` pages on); `ended` are those whose processing has ended."""

    def __init__(self, listed: list[str], ended: frozenset[str] = frozenset()) -> None:
        self.listed = listed
        self.ended = ended
        self.calls: list[str] = []

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        path = request.url.path
        if path == "/v1/messages/batches":
            limit = int(request.url.params.get("limit", "20"))
            self.calls.append(f"GET {path}?limit={limit}")
            after = request.url.params.get("after_id")
            start = self.listed.index(after) + 1 if after else 0
            ids = self.listed[start : start + limit]
            page = {
                "data": [
                    _batch(batch_id, "ended" if batch_id in self.ended else "in_progress")
                    for batch_id in ids
                ],
                "has_more": start + limit < len(self.listed),
                "first_id": ids[0],
                "last_id": ids[-1],
            }
            return httpx2.Response(200, json=page)
        self.calls.append(f"{request.method} {path}")
        return httpx2.Response(200, json=_batch(path.rsplit("/", 1)[-1], "ended"))

    def batches(self) -> AnthropicMessageBatches:
        return AnthropicMessageBatches(
            ExtractConfig(),
            price_factor=0.5,
            api_key="test-key",
            base_url="http://testserver",
            http_client=httpx2.Client(transport=httpx2.MockTransport(self.handle)),
            max_retries=0,
        )


def test_the_open_batches_are_read_from_one_page_their_size() -> None:
    # Given three open batches, the newest, above 300 that ended long ago, one of the three
    # just ended
    ours = ["msgbatch_003", "msgbatch_002", "msgbatch_001"]
    old = [f"msgbatch_old_{n}" for n in range(300)]
    workspace = Workspace(ours + old, ended=frozenset({"msgbatch_001", *old}))

    # When a round asks for the open batches' states
    states = workspace.batches().states(ours)

    # Then one listing of a page their size (and ten more) answers all three, with no retrieve
    assert states == {
        "msgbatch_003": BatchState.IN_PROGRESS,
        "msgbatch_002": BatchState.IN_PROGRESS,
        "msgbatch_001": BatchState.ENDED,
    }
    assert workspace.calls == ["GET /v1/messages/batches?limit=13"]


def test_open_batches_behind_another_applications_are_read_on_the_next_pages() -> None:
    # Given a workspace where another application made many batches since ours
    ours = ["msgbatch_ours_1", "msgbatch_ours_2"]
    workspace = Workspace([f"msgbatch_other_{n}" for n in range(150)] + ours)

    # When a round asks for our batches' states
    states = workspace.batches().states(ours)

    # Then both are read from the listing's next pages of a hundred, with no retrieve
    assert states == dict.fromkeys(ours, BatchState.IN_PROGRESS)
    assert workspace.calls == [
        "GET /v1/messages/batches?limit=12",
        "GET /v1/messages/batches?limit=100",
        "GET /v1/messages/batches?limit=100",
    ]


def test_a_batch_the_listing_does_not_show_is_retrieved_after_a_bounded_read() -> None:
    # Given a busy workspace of 5,000 batches, none of them ours (ours was deleted from the
    # listing, or is older than anything it shows)
    workspace = Workspace([f"msgbatch_other_{n}" for n in range(5_000)])

    # When a round asks for our batch's state
    states = workspace.batches().states(["msgbatch_ours"])

    # Then about 500 batches are listed, not 5,000, and ours is retrieved on its own
    assert states == {"msgbatch_ours": BatchState.ENDED}
    assert workspace.calls == [
        "GET /v1/messages/batches?limit=11",
        *["GET /v1/messages/batches?limit=100"] * 5,
        "GET /v1/messages/batches/msgbatch_ours",
    ]
