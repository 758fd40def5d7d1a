"""The load simulator's fake model server, through the real `anthropic` client over HTTP:
its per-minute buckets (max_tokens charged at the start), 429 with retry-after, 529 during an
outage, token metering and the Message Batches API."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from memwrite_local.loadtest.clock import VirtualClock
from memwrite_local.loadtest.model_server import FakeModelServer, ModelLimits, serving

EXTRACT_SCHEMA = {
    "type": "object",
    "properties": {"candidates": {"type": "array", "items": {"type": "object"}}},
}


def _params(max_tokens: int = 1_000, text: str = "I moved to Lisbon.") -> dict[str, Any]:
    return {
        "model": "claude-haiku-4-5",
        "max_tokens": max_tokens,
        "system": "Extract memories.",
        "messages": [{"role": "user", "content": text}],
        "output_config": {"format": {"type": "json_schema", "schema": EXTRACT_SCHEMA}},
    }


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(now=1_800_000_000.0)


def _serve(clock: VirtualClock, **options: Any) -> Iterator[tuple[FakeModelServer, Any]]:
    with serving(FakeModelServer(clock=clock.time, **options)) as server:
        client = anthropic.Anthropic(api_key="sk-fake", base_url=server.url, max_retries=0)
        yield server, client


def test_an_answer_is_a_recorded_extraction_metered_by_the_request(clock: VirtualClock) -> None:
    # Given a server without limits
    for server, client in _serve(clock):
        # When the real client asks for an extraction
        message = client.messages.create(**_params())
        # Then the answer is a recorded extraction and the meter holds its tokens
        assert message.content[0].type == "text"
        assert '"candidates"' in message.content[0].text
        assert server.meter.model_calls == 1
        assert server.meter.input_tokens == message.usage.input_tokens > 0
        assert server.meter.output_tokens == message.usage.output_tokens > 0


def test_max_tokens_is_charged_at_the_start_and_refunded_at_the_end(clock: VirtualClock) -> None:
    # Given 10,000 output tokens a minute, each call lasting 3 simulated seconds
    limits = ModelLimits(output_tokens_per_minute=10_000)
    for server, client in _serve(clock, limits=limits, burst_floor=0, call_latency_s=3):
        # When two calls at once each reserve 4,000 output tokens, a third is refused
        client.messages.create(**_params(max_tokens=4_000))
        client.messages.create(**_params(max_tokens=4_000))
        with pytest.raises(anthropic.RateLimitError):
            client.messages.create(**_params(max_tokens=4_000))
        # Then once they have ended, what they did not use is back: more calls pass ...
        clock.advance_to(clock.now + 3)
        for _ in range(2):
            client.messages.create(**_params(max_tokens=4_000))
            clock.advance_to(clock.now + 3)
        assert server.meter.rate_limited == 1
        # ... but with one in flight, one reserving more than is left gets a 429 and a retry-after
        client.messages.create(**_params(max_tokens=4_000))
        with pytest.raises(anthropic.RateLimitError) as refused:
            client.messages.create(**_params(max_tokens=9_900))
        retry_after = int(refused.value.response.headers["retry-after"])
        assert 1 <= retry_after <= 60
        assert server.meter.rate_limited == 2
        # And after that long on the clock it passes
        clock.advance_to(clock.now + retry_after)
        client.messages.create(**_params(max_tokens=9_900))
        assert server.meter.model_calls == 8


def test_requests_per_minute_refill_with_the_clock(clock: VirtualClock) -> None:
    # Given 2 requests a minute
    for server, client in _serve(clock, limits=ModelLimits(requests_per_minute=2)):
        client.messages.create(**_params())
        client.messages.create(**_params())
        # When a third comes in the same second, it is refused
        with pytest.raises(anthropic.RateLimitError):
            client.messages.create(**_params())
        # Then half a minute later one more fits
        clock.advance_to(clock.now + 30)
        client.messages.create(**_params())
        assert (server.meter.model_calls, server.meter.rate_limited) == (4, 1)


def test_an_outage_answers_529_and_the_sdk_retries_it(clock: VirtualClock) -> None:
    # Given an outage from now for ten minutes, and a client retrying twice (sleeps not slept)
    start = clock.now
    with (
        clock.installed(),
        serving(FakeModelServer(clock=clock.time, outage=(start, start + 600))) as server,
    ):
        client = anthropic.Anthropic(api_key="sk-fake", base_url=server.url, max_retries=2)
        # When a call is made during it
        with pytest.raises(anthropic.InternalServerError) as failed:
            client.messages.create(**_params())
        # Then every attempt was a 529 overloaded_error
        assert failed.value.status_code == 529
        assert server.meter.overloaded == server.meter.model_calls == 3
        # And after it the same call is answered
        clock.advance_to(start + 600)
        assert client.messages.create(**_params()).usage.output_tokens > 0


def test_message_batches_end_after_their_latency_with_every_result(clock: VirtualClock) -> None:
    # Given a server whose batches take ten minutes, with no room for live calls
    limits = ModelLimits(requests_per_minute=0.001)
    for server, client in _serve(clock, limits=limits, batch_latency_s=600):
        requests = [{"custom_id": f"ep-{n}", "params": _params(text=f"turn {n}")} for n in range(3)]
        # When a batch is created, it is in progress
        batch = client.messages.batches.create(requests=requests)
        assert batch.processing_status == "in_progress"
        assert batch.request_counts.processing == 3
        # Then ten minutes later it has ended and its results are the recorded answers
        clock.advance_to(clock.now + 600)
        ended = client.messages.batches.retrieve(batch.id)
        assert ended.processing_status == "ended"
        assert ended.request_counts.succeeded == 3
        results = list(client.messages.batches.results(batch.id))
        assert sorted(r.custom_id for r in results) == ["ep-0", "ep-1", "ep-2"]
        assert all(r.result.type == "succeeded" for r in results)
        # And batch tokens are metered apart, drawing nothing from the live buckets
        assert server.meter.batch_requests == 3
        assert server.meter.batch_input_tokens > 0
        assert server.meter.model_calls == 0


def test_the_batch_listing_pages_as_the_api_does(clock: VirtualClock) -> None:
    # Given five batches created one after another
    for _, client in _serve(clock):
        ids = [
            client.messages.batches.create(
                requests=[{"custom_id": "ep", "params": _params(text=f"turn {n}")}]
            ).id
            for n in range(5)
        ]
        newest_first = ids[::-1]
        # When they are listed two a page
        first = client.messages.batches.list(limit=2)
        # Then the first page is the newest two, with more after it, and the SDK's paging
        # (after_id) reads every batch once, newest first
        assert [b.id for b in first.data] == newest_first[:2]
        assert (first.has_more, first.first_id, first.last_id) == (True, ids[4], ids[3])
        assert [b.id for b in client.messages.batches.list(limit=2)] == newest_first
        # And the page before a batch holds the ones just before it in the listing (newer),
        # still newest first
        before = client.messages.batches.list(limit=2, before_id=ids[1])
        assert ([b.id for b in before.data], before.has_more) == ([ids[3], ids[2]], True)
        last = client.messages.batches.list(limit=2, before_id=ids[3])
        assert ([b.id for b in last.data], last.has_more) == ([ids[4]], False)
        # And a page of no batches, or of more than 1,000, is refused
        for limit in (0, 1_001):
            with pytest.raises(anthropic.BadRequestError):
                client.messages.batches.list(limit=limit)


def _cached_params(prefix: str, text: str = "I moved to Lisbon.") -> dict[str, Any]:
    """A request whose system prompt is a prefix marked for the cache, then a task block."""
    system = [
        {"type": "text", "text": prefix, "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "This is a full pass."},
    ]
    return {**_params(text=text), "system": system}


def test_a_cached_prefix_is_written_then_read_within_its_lifetime(clock: VirtualClock) -> None:
    # Given a prefix of about 5,000 tokens (20,000 bytes) and the default 4,096-token minimum
    prefix = "rules and worked examples. " * 740
    for server, client in _serve(clock):
        # When the same prefix is sent three times: at once, 4 minutes later, then 6 minutes on
        first = client.messages.create(**_cached_params(prefix, "I moved to Lisbon.")).usage
        clock.advance_to(clock.now + 240)
        second = client.messages.create(**_cached_params(prefix, "I love cilantro.")).usage
        clock.advance_to(clock.now + 360)
        third = client.messages.create(**_cached_params(prefix, "I hate cilantro.")).usage
        # Then the first writes it, the second reads it (the lifetime restarts), the third,
        # more than 5 minutes after the last use, writes it again
        written = first.cache_creation_input_tokens
        assert written is not None and written >= 4_096
        assert (first.cache_read_input_tokens, second.cache_creation_input_tokens) == (0, 0)
        assert second.cache_read_input_tokens == written
        assert (third.cache_creation_input_tokens, third.cache_read_input_tokens) == (written, 0)
        # And input_tokens is the uncached rest, as the API's is; the meter holds all three
        assert 0 < first.input_tokens < 200
        assert server.meter.cache_creation_input_tokens == 2 * written
        assert server.meter.cache_read_input_tokens == written
        assert server.meter.input_tokens == sum(u.input_tokens for u in (first, second, third))


def test_a_prefix_under_the_minimum_or_unmarked_is_never_cached(clock: VirtualClock) -> None:
    # Given a short marked prefix and a long unmarked system prompt
    for server, client in _serve(clock):
        short = [client.messages.create(**_cached_params("Extract memories.")) for _ in range(2)]
        long_plain = {**_params(), "system": "rules and worked examples. " * 740}
        plain = [client.messages.create(**long_plain) for _ in range(2)]
        # Then nothing is written or read: every input token is billed uncached
        for message in (*short, *plain):
            assert not message.usage.cache_creation_input_tokens
            assert not message.usage.cache_read_input_tokens
        assert server.meter.cache_creation_input_tokens == 0
        assert server.meter.cache_read_input_tokens == 0
        assert plain[0].usage.input_tokens > 5_000


def test_cache_reads_do_not_draw_on_the_input_bucket(clock: VirtualClock) -> None:
    # Given 8,000 input tokens a minute and a 5,000-token cached prefix
    prefix = "rules and worked examples. " * 740
    limits = ModelLimits(input_tokens_per_minute=8_000)
    for server, client in _serve(clock, limits=limits, burst_floor=0):
        # When the prefix is written once, then read by three more calls in the same minute
        for text in ("a", "b", "c", "d"):
            client.messages.create(**_cached_params(prefix, text))
        # Then none was refused: the reads count only their uncached tokens
        assert server.meter.rate_limited == 0
        assert server.meter.cache_read_input_tokens > 3 * 4_096


def test_batched_requests_read_the_cache_too(clock: VirtualClock) -> None:
    # Given a batch of three requests sharing a cached prefix
    prefix = "rules and worked examples. " * 740
    for server, client in _serve(clock, batch_latency_s=60):
        requests = [
            {"custom_id": f"r{i}", "params": _cached_params(prefix, text)}
            for i, text in enumerate(("a", "b", "c"))
        ]
        batch = client.messages.batches.create(requests=requests)  # type: ignore[arg-type]
        clock.advance_to(clock.now + 60)
        usages = [
            line.result.message.usage
            for line in client.messages.batches.results(batch.id)
            if line.result.type == "succeeded"
        ]
        # Then the first writes the prefix and the other two read it, metered on the batch lane
        assert [bool(u.cache_creation_input_tokens) for u in usages] == [True, False, False]
        assert [bool(u.cache_read_input_tokens) for u in usages] == [False, True, True]
        assert server.meter.batch_cache_read_input_tokens == 2 * (
            usages[0].cache_creation_input_tokens or 0
        )
