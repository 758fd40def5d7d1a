"""How a batch-lane round learns its open batches' states from the Message Batches API: one
listing while they are on its first page, a bounded read of a busy workspace's history, and a
retrieve for one the listing does not show. Through the real `anthropic` client over a mock
transport."""

from __future__ import annotations

from typing import Any

import httpx2

from memwrite.adapters.anthropic.batches import AnthropicMessageBatches
from memwrite.backfill.ports import BatchState
from memwrite.config import ExtractConfig

PAGE = 100


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
    """A workspace's batches, newest first, listed `PAGE` a page (`after_id` pages on)."""

    def __init__(self, listed: list[str]) -> None:
        self.listed = listed
        self.calls: list[str] = []

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        path = request.url.path
        self.calls.append(f"{request.method} {path}")
        if path == "/v1/messages/batches":
            after = request.url.params.get("after_id")
            start = self.listed.index(after) + 1 if after else 0
            ids = self.listed[start : start + PAGE]
            page = {
                "data": [_batch(batch_id) for batch_id in ids],
                "has_more": start + PAGE < len(self.listed),
                "first_id": ids[0],
                "last_id": ids[-1],
            }
            return httpx2.Response(200, json=page)
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


def test_open_batches_on_the_second_page_are_read_with_two_listings() -> None:
    # Given a workspace where another application made many batches since ours
    ours = ["msgbatch_ours_1", "msgbatch_ours_2"]
    workspace = Workspace([f"msgbatch_other_{n}" for n in range(150)] + ours)

    # When a round asks for our batches' states
    states = workspace.batches().states(ours)

    # Then both are read from the listing's first two pages, with no retrieve
    assert states == dict.fromkeys(ours, BatchState.IN_PROGRESS)
    assert workspace.calls == ["GET /v1/messages/batches"] * 2


def test_a_batch_the_listing_does_not_show_is_retrieved_after_a_bounded_read() -> None:
    # Given a busy workspace of 5,000 batches, none of them ours (ours was deleted from the
    # listing, or is older than anything it shows)
    workspace = Workspace([f"msgbatch_other_{n}" for n in range(5_000)])

    # When a round asks for our batch's state
    states = workspace.batches().states(["msgbatch_ours"])

    # Then at most five pages are read, not fifty, and the batch is retrieved on its own
    assert states == {"msgbatch_ours": BatchState.ENDED}
    assert workspace.calls == ["GET /v1/messages/batches"] * 5 + [
        "GET /v1/messages/batches/msgbatch_ours"
    ]
