"""A fake Anthropic API on 127.0.0.1 with a real account's rate limits, for the load simulator.

The real `anthropic` client reaches it through `ANTHROPIC_BASE_URL`, as the handlers build it.
It speaks `POST /v1/messages` and the Message Batches API (`POST /v1/messages/batches`, `GET
/v1/messages/batches` (the listing, newest first), `GET /v1/messages/batches/{id}`, its
`/results` as JSON lines, `/cancel`), with the real JSON shapes.

Limits are the API's: token buckets for requests, input tokens and output tokens per minute,
refilled continuously. A call is charged its input tokens and its whole `max_tokens` when it
starts (the API estimates output from `max_tokens`), and the output bucket gets back what the
answer did not use when it ends. A call a bucket cannot pay is a 429 `rate_limit_error` whose
`retry-after` says when it could; during an injected outage every call is a 529
`overloaded_error`. Batches do not draw on the per-minute buckets (they have their own queue
limits) and end `batch_latency_s` after they are created, every request answered.

Answers are recorded ones (`tests/recorded/anthropic/`): an extraction gets one of the recorded
extraction outputs whose candidates cite the batch's first turn, picked by a hash of the
request, so a run is repeatable; the other calls get the recorded answer of their kind. Input
tokens are metered from the request's size (a quarter of its bytes, the usual ratio for
English JSON), output tokens are the recorded answer's.

Prompt caching is metered as the API bills it (`PromptCache`): the system blocks up to the last
one marked `cache_control` are the request's cached prefix, counted the same way (a quarter of
their bytes as JSON). A prefix under the model's minimum cacheable length (`min_cache_tokens`,
Claude Haiku 4.5's 4,096 by default) is not cached; one seen for the same model within the
cache's 5-minute lifetime (refreshed by every hit) is read (`cache_read_input_tokens`);
otherwise it is written (`cache_creation_input_tokens`). `input_tokens` is the rest, uncached,
as the API's is. Only uncached and written tokens draw on the input-tokens bucket: cache reads
do not count against the API's input limit either.

A call holds its reservation for `call_latency_s` of simulated time (what a real call takes),
so calls made close together see each other's `max_tokens` in flight, as concurrent workers
do. Scaled down a thousandfold, a minute's output limit can be smaller than one call's
`max_tokens`, which no real account's is: a bucket holds at least `burst_floor` tokens,
refilled at the scaled rate.
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
import json
import math
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

__all__ = [
    "RECORDED_ANSWERS",
    "CacheUsage",
    "FakeModelServer",
    "Meter",
    "ModelLimits",
    "PromptCache",
    "RecordedAnswers",
    "TokenBucket",
    "serving",
]

RECORDED_ANSWERS = Path(__file__).resolve().parents[2] / "tests" / "recorded" / "anthropic"
BYTES_PER_TOKEN = 4
BATCH_EXPIRY_S = 24 * 3600  # the API's: a batch not ended a day after creation expires
_MAX_LIST_LIMIT = 1_000  # the API's largest listing page
CACHE_LIFETIME_S = 300.0  # the API's default ("ephemeral", 5 minutes), refreshed on each hit
# Which recorded answer a request gets, by a property its answer schema asks for.
_KINDS = {
    "candidates": "extract_",
    "questions": "hype_questions",
    "same": "dedupe_same",
    "outcome": "verify_pass",
    "decisions": "resolve_decision",
}
_BATCH_PATH = re.compile(r"^/v1/messages/batches/(?P<id>[\w-]+)(?P<rest>/results|/cancel)?$")


@dataclass(frozen=True)
class ModelLimits:
    """Per-minute limits of one model on one account; None: unlimited."""

    requests_per_minute: float | None = None
    input_tokens_per_minute: float | None = None
    output_tokens_per_minute: float | None = None


class TokenBucket:
    """`per_minute` tokens a minute, refilled continuously up to a minute's worth (at least
    `floor`: see `FakeModelServer.burst_floor`)."""

    def __init__(self, per_minute: float, now: float, floor: float = 0.0) -> None:
        self.capacity = max(per_minute, floor)
        self.level = self.capacity
        self._rate = per_minute / 60.0
        self._at = now

    def _refill(self, now: float) -> None:
        if now > self._at:
            self.level = min(self.capacity, self.level + (now - self._at) * self._rate)
            self._at = now

    def wait_s(self, amount: float, now: float) -> float:
        """Seconds until `amount` can be taken (0: now); more than a minute's worth never is."""
        self._refill(now)
        if amount <= self.level:
            return 0.0
        if amount > self.capacity:
            return math.inf
        return (amount - self.level) / self._rate

    def take(self, amount: float) -> None:
        self.level -= amount

    def give_back(self, amount: float) -> None:
        self.level = min(self.capacity, self.level + amount)


@dataclass
class Meter:
    """What the server answered and what it cost, per lane."""

    model_calls: int = 0  # every POST /v1/messages, answered or refused
    rate_limited: int = 0  # 429 answers
    overloaded: int = 0  # 529 answers
    input_tokens: int = 0  # of answered live calls, uncached (as the API's `input_tokens`)
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    batches: int = 0
    batch_requests: int = 0
    batch_input_tokens: int = 0
    batch_output_tokens: int = 0
    batch_cache_creation_input_tokens: int = 0
    batch_cache_read_input_tokens: int = 0


@dataclass(frozen=True)
class CacheUsage:
    """A request's input tokens as the API bills them."""

    input_tokens: int  # uncached
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0


@dataclass
class PromptCache:
    """The API's prompt cache, per model and prefix: what a request reads, writes or misses."""

    min_tokens: int = 4_096
    lifetime_s: float = CACHE_LIFETIME_S
    _last_used: dict[str, float] = field(default_factory=dict)

    def usage(self, request: dict[str, Any], body: bytes, now: float) -> tuple[CacheUsage, str]:
        """The request's usage if it ran at `now`, and its prefix's key ("" : nothing cached);
        nothing is remembered until `use`."""
        total = input_tokens_of(body)
        prefix = _cached_prefix(request)
        tokens = input_tokens_of(prefix) if prefix else 0
        if tokens < self.min_tokens:
            return CacheUsage(total), ""
        key = hashlib.sha256(str(request.get("model")).encode() + b"\0" + prefix).hexdigest()
        uncached = max(1, total - tokens)
        last = self._last_used.get(key)
        if last is not None and now - last <= self.lifetime_s:
            return CacheUsage(uncached, cache_read_input_tokens=tokens), key
        return CacheUsage(uncached, cache_creation_input_tokens=tokens), key

    def use(self, key: str, now: float) -> None:
        """The prefix was read or written at `now`: its lifetime starts again."""
        if key:
            self._last_used[key] = now


def _cached_prefix(request: dict[str, Any]) -> bytes:
    """The system blocks up to the last one marked `cache_control`, as JSON (b"": none)."""
    system = request.get("system")
    if not isinstance(system, list):
        return b""
    marked = [i for i, block in enumerate(system) if block.get("cache_control")]
    if not marked:
        return b""
    return json.dumps(system[: marked[-1] + 1], separators=(",", ":")).encode()


class RecordedAnswers:
    """The recorded Messages API answers, one per kind of call (several for extraction)."""

    def __init__(self, directory: Path = RECORDED_ANSWERS) -> None:
        self.extractions: list[dict[str, Any]] = []
        self.by_name: dict[str, dict[str, Any]] = {}
        for path in sorted(directory.glob("*.json")):
            answer = json.loads(path.read_text(encoding="utf-8"))
            if answer.get("type") != "message" or answer.get("stop_reason") != "end_turn":
                continue  # error bodies and truncated answers: not what a healthy model says
            self.by_name[path.stem] = answer
            if path.stem.startswith("extract_") and _cites_first_turn_only(answer):
                self.extractions.append(answer)
        if not self.extractions:
            raise FileNotFoundError(f"no recorded extraction answers in {directory}")

    def answer(self, request: dict[str, Any], body: bytes, cache: CacheUsage) -> dict[str, Any]:
        """The recorded answer for `request`, its usage metered from this request (`cache`)."""
        schema = request.get("output_config", {}).get("format", {}).get("schema", {})
        kind = next((k for k in _KINDS if k in schema.get("properties", {})), "candidates")
        if kind == "candidates":
            digest = int(hashlib.sha256(body).hexdigest()[:8], 16)
            recorded = self.extractions[digest % len(self.extractions)]
        else:
            recorded = self.by_name[_KINDS[kind]]
        output_tokens = min(int(recorded["usage"]["output_tokens"]), int(request["max_tokens"]))
        usage = {
            **recorded["usage"],
            "input_tokens": cache.input_tokens,
            "cache_creation_input_tokens": cache.cache_creation_input_tokens,
            "cache_read_input_tokens": cache.cache_read_input_tokens,
            "output_tokens": output_tokens,
        }
        return {**recorded, "id": f"msg_{hashlib.sha256(body).hexdigest()[:24]}", "usage": usage}


def _cites_first_turn_only(answer: dict[str, Any]) -> bool:
    """A recorded extraction any batch can get: valid, and citing only the first turn."""
    from pydantic import ValidationError

    from memwrite.prompts.extract import ExtractionResult

    try:
        result = ExtractionResult.model_validate_json(answer["content"][0]["text"])
    except ValidationError:  # recorded to test the malformed-answer path
        return False
    return all(candidate.source_turn_id == "T1" for candidate in result.candidates)


def input_tokens_of(body: bytes) -> int:
    return max(1, len(body) // BYTES_PER_TOKEN)


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).isoformat().replace("+00:00", "Z")


@dataclass
class _Batch:
    batch_id: str
    created_at: float
    ends_at: float
    results: list[dict[str, Any]]
    canceled_at: float | None = None


@dataclass
class FakeModelServer:
    """The server's state: limits, outage window, meter and batches, on `clock`'s time."""

    clock: Callable[[], float]
    limits: ModelLimits = ModelLimits()
    answers: RecordedAnswers = field(default_factory=RecordedAnswers)
    outage: tuple[float, float] | None = None  # [start, end) in the clock's seconds
    batch_latency_s: float = 1_800.0
    call_latency_s: float = 3.0
    burst_floor: float = 16_384.0  # tokens; two calls at the extraction's default max_tokens
    meter: Meter = field(default_factory=Meter)
    cache: PromptCache = field(default_factory=PromptCache)
    url: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _buckets: dict[str, TokenBucket] = field(default_factory=dict)
    _batches: dict[str, _Batch] = field(default_factory=dict)
    _ids: Iterator[int] = field(default_factory=itertools.count)
    _refunds: list[tuple[float, float]] = field(default_factory=list)  # (due, output tokens)

    def __post_init__(self) -> None:
        now = self.clock()
        for name, limit in (
            ("requests", self.limits.requests_per_minute),
            ("input_tokens", self.limits.input_tokens_per_minute),
            ("output_tokens", self.limits.output_tokens_per_minute),
        ):
            if limit is not None:
                floor = 1.0 if name == "requests" else self.burst_floor
                self._buckets[name] = TokenBucket(limit, now, floor)

    # POST /v1/messages
    def message(self, body: bytes) -> tuple[int, dict[str, Any], dict[str, str]]:
        request = json.loads(body)
        now = self.clock()
        with self._lock:
            self.meter.model_calls += 1
            if self.outage is not None and self.outage[0] <= now < self.outage[1]:
                self.meter.overloaded += 1
                return 529, _error("overloaded_error", "Overloaded"), {}
            self._settle_refunds(now)
            cache, key = self.cache.usage(request, body, now)
            charge = {
                "requests": 1.0,
                # Cache reads do not count against the input limit.
                "input_tokens": float(cache.input_tokens + cache.cache_creation_input_tokens),
                "output_tokens": float(request["max_tokens"]),
            }
            waits = {
                name: bucket.wait_s(charge[name], now) for name, bucket in self._buckets.items()
            }
            if any(waits.values()):
                self.meter.rate_limited += 1
                name, wait = max(waits.items(), key=lambda item: item[1])
                retry_after = 60 if math.isinf(wait) else max(1, math.ceil(wait))
                message = f"This request would exceed your organization's rate limit of {name}"
                return 429, _error("rate_limit_error", message), {"retry-after": str(retry_after)}
            for name, bucket in self._buckets.items():
                bucket.take(charge[name])
            self.cache.use(key, now)
            answer = self.answers.answer(request, body, cache)
            usage = answer["usage"]
            unused = charge["output_tokens"] - usage["output_tokens"]
            heapq.heappush(self._refunds, (now + self.call_latency_s, unused))
            self.meter.input_tokens += usage["input_tokens"]
            self.meter.output_tokens += usage["output_tokens"]
            self.meter.cache_creation_input_tokens += cache.cache_creation_input_tokens
            self.meter.cache_read_input_tokens += cache.cache_read_input_tokens
        return 200, answer, {}

    def _settle_refunds(self, now: float) -> None:
        """Calls that have ended by `now` give back the output they reserved and did not use."""
        bucket = self._buckets.get("output_tokens")
        while self._refunds and self._refunds[0][0] <= now:
            _, unused = heapq.heappop(self._refunds)
            if bucket is not None:
                bucket.wait_s(0, now)  # refilled to now first: the refund lands on today's level
                bucket.give_back(unused)

    # POST /v1/messages/batches
    def create_batch(self, body: bytes) -> tuple[int, dict[str, Any], dict[str, str]]:
        requests = json.loads(body)["requests"]
        now = self.clock()
        with self._lock:
            batch_id = f"msgbatch_{next(self._ids):012d}"
            results = []
            for item in requests:
                params = json.dumps(item["params"]).encode()
                # The batch's requests run when it is created, in order: caching applies.
                cache, key = self.cache.usage(item["params"], params, now)
                self.cache.use(key, now)
                answer = self.answers.answer(item["params"], params, cache)
                self.meter.batch_input_tokens += answer["usage"]["input_tokens"]
                self.meter.batch_output_tokens += answer["usage"]["output_tokens"]
                self.meter.batch_cache_creation_input_tokens += cache.cache_creation_input_tokens
                self.meter.batch_cache_read_input_tokens += cache.cache_read_input_tokens
                results.append(
                    {
                        "custom_id": item["custom_id"],
                        "result": {"type": "succeeded", "message": answer},
                    }
                )
            self.meter.batches += 1
            self.meter.batch_requests += len(requests)
            batch = _Batch(batch_id, now, now + self.batch_latency_s, results)
            self._batches[batch_id] = batch
            return 200, self._batch_json(batch, now), {}

    # GET /v1/messages/batches/{id}, /results; POST .../cancel
    def batch(
        self, batch_id: str, rest: str | None, method: str
    ) -> tuple[int, Any, dict[str, str]]:
        now = self.clock()
        with self._lock:
            found = self._batches.get(batch_id)
            if found is None:
                return 404, _error("not_found_error", f"no batch {batch_id}"), {}
            if rest == "/cancel" and method == "POST":
                if now < found.ends_at:
                    found.canceled_at = now
                    found.ends_at = now
                return 200, self._batch_json(found, now), {}
            if rest == "/results":
                if now < found.ends_at:
                    return 400, _error("invalid_request_error", "batch still in progress"), {}
                return 200, self._results(found), {}
            return 200, self._batch_json(found, now), {}

    def _results(self, batch: _Batch) -> list[dict[str, Any]]:
        if batch.canceled_at is None:
            return batch.results
        return [{**r, "result": {"type": "canceled"}} for r in batch.results]

    def _batch_json(self, batch: _Batch, now: float) -> dict[str, Any]:
        ended = now >= batch.ends_at
        count = len(batch.results)
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if not ended:
            counts["processing"] = count
        elif batch.canceled_at is not None:
            counts["canceled"] = count
        else:
            counts["succeeded"] = count
        return {
            "id": batch.batch_id,
            "type": "message_batch",
            "processing_status": "ended" if ended else "in_progress",
            "request_counts": counts,
            "created_at": _iso(batch.created_at),
            "expires_at": _iso(batch.created_at + BATCH_EXPIRY_S),
            "ended_at": _iso(batch.ends_at) if ended else None,
            "cancel_initiated_at": None if batch.canceled_at is None else _iso(batch.canceled_at),
            "archived_at": None,
            "results_url": f"{self.url}/v1/messages/batches/{batch.batch_id}/results"
            if ended
            else None,
        }

    # GET /v1/messages/batches: newest first, `limit` a page (1 to 1,000, default 20), the
    # page after `after_id` (older) or before `before_id` (newer); `has_more`: more that way.
    def list_batches(self, query: str) -> tuple[int, Any, dict[str, str]]:
        params = parse_qs(query)
        limit = int(params.get("limit", ["20"])[0])
        if not 1 <= limit <= _MAX_LIST_LIMIT:
            message = f"limit: must be between 1 and {_MAX_LIST_LIMIT}"
            return 400, _error("invalid_request_error", message), {}
        after = params.get("after_id", [""])[0]
        before = params.get("before_id", [""])[0]
        now = self.clock()
        with self._lock:
            oldest_first = list(self._batches)  # created in this order
            end = len(oldest_first)
            if before in self._batches:
                start = oldest_first.index(before) + 1
                end = min(end, start + limit)
                has_more = end < len(oldest_first)
            else:
                if after in self._batches:
                    end = oldest_first.index(after)
                start = max(0, end - limit)
                has_more = start > 0
            page = [
                self._batch_json(self._batches[batch_id], now)
                for batch_id in reversed(oldest_first[start:end])
            ]
        listing = {
            "data": page,
            "has_more": has_more,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
        }
        return 200, listing, {}

    def batches_in_flight(self) -> int:
        now = self.clock()
        with self._lock:
            return sum(1 for batch in self._batches.values() if now < batch.ends_at)

    def route(self, method: str, path: str, body: bytes) -> tuple[int, Any, dict[str, str]]:
        path, _, query = path.partition("?")
        if method == "POST" and path == "/v1/messages":
            return self.message(body)
        if method == "GET" and path == "/v1/messages/batches":
            return self.list_batches(query)
        if method == "POST" and path == "/v1/messages/batches":
            return self.create_batch(body)
        if match := _BATCH_PATH.match(path):
            return self.batch(match["id"], match["rest"], method)
        return 404, _error("not_found_error", f"{method} {path}"), {}


@contextmanager
def serving(server: FakeModelServer) -> Iterator[FakeModelServer]:
    """`server` answering on 127.0.0.1 (an ephemeral port, in `server.url`) while entered."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: the SDK's pool reuses its connections
        # Headers and body leave at once: with Nagle on, each answer waits out a delayed ACK.
        disable_nagle_algorithm = True
        wbufsize = 65_536

        def _answer(self, method: str) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status, reply, headers = server.route(method, self.path, body)
            if isinstance(reply, list):  # batch results: JSON lines
                payload = "".join(json.dumps(line) + "\n" for line in reply).encode()
                content_type = "application/binary"
            else:
                payload = json.dumps(reply).encode()
                content_type = "application/json"
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("request-id", f"req_{hashlib.sha256(body).hexdigest()[:20]}")
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)

        def do_POST(self) -> None:
            self._answer("POST")

        def do_GET(self) -> None:
            self._answer("GET")

        def log_message(self, format: str, *args: object) -> None:
            pass

    http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    http.daemon_threads = True
    server.url = f"http://127.0.0.1:{http.server_address[1]}"
    thread = threading.Thread(target=http.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield server
    finally:
        http.shutdown()
        http.server_close()
