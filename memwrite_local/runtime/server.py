"""`memwrite serve`: the HTTP API on 127.0.0.1, each request turned into an API Gateway event.

Built on the standard library's `ThreadingHTTPServer` (one thread per connection, so a slow
client stalls only its own thread, and a socket timeout ends it). A request returns after
stage 1, as on AWS; one background `QueueWorker` drains the queue through the pipeline stages
and stage 7, a `DeliveryWorker` beside it sends the webhook deliveries stage 7 queued, and a
`BackfillWorker` runs the pending episodes on the model budget's spare capacity; with
`pipeline.backfill.mode = batch` a `BatchWorker` runs a round of the batch lane every
`backfill.poll_secs` instead (as the scheduled backfill function does on AWS). A
`BackfillJobWorker` runs the backfills `POST /v1/users/{user_id}/backfill` hands over.
Every answer is JSON, the server's own refusals included (bad framing, unknown method), but the
API explorer at `/docs` (Swagger UI on `GET /v1/openapi.json`).
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager, nullcontext
from functools import cached_property
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from memwrite_local.runtime.runner import LocalRunner

if TYPE_CHECKING:
    from memwrite.backfill import BatchDeps

__all__ = [
    "DOCS_PATHS",
    "BatchWorker",
    "DeliveryWorker",
    "LocalServer",
    "PollingWorker",
    "QueueWorker",
    "api_explorer_html",
    "make_server",
]

logger = logging.getLogger(__name__)

SOCKET_TIMEOUT_SECS = 10.0  # a client silent this long mid-request is cut off (408)
WORKER_POLL_SECS = 1.0  # the worker also looks on its own, for redeliveries after a timeout
# How long a stop waits for the batch in hand (a slow model call may hold it far longer).
WORKER_STOP_GRACE_SECS = 4.0
# The continuous backfill looks for pending episodes this often (and once at start).
BACKFILL_POLL_SECS = 30.0
_READ_CHUNK = 65_536
DOCS_PATHS = frozenset({"/docs", "/docs/"})
_IMPORT_PATH = re.compile(r"/v1/users/[^/]+/import")
_BACKFILL_PATH = re.compile(r"/v1/users/[^/]+/backfill")


def api_explorer_html(spec: str) -> str:
    """Swagger UI with its script and styles inline (no CDN), showing `spec`."""
    from aws_lambda_powertools.event_handler.openapi import swagger_ui
    from aws_lambda_powertools.event_handler.openapi.swagger_ui import generate_swagger_html

    assets = Path(swagger_ui.__file__).parent
    return generate_swagger_html(
        # As Powertools' own swagger route: "</" would end the inline <script> early.
        spec.replace("</", "<\\/"),
        (assets / "swagger-ui-bundle.min.js").read_text(encoding="utf-8"),
        (assets / "swagger-ui.min.css").read_text(encoding="utf-8"),
        "",
        None,
    )


class PollingWorker(ABC):
    """One thread doing its work whenever notified (and every `poll_secs`, so what a restart
    or a timed-out delivery left is picked up).

    Bounded: one run at a time, whatever the request rate; the queue itself (on disk with
    SQLite) holds the backlog, not memory. `stop` is prompt whatever the backlog: the work
    looks at the stop flag between batches, finishes the batch in hand and leaves the rest
    queued for the next start. A batch still running after the grace period (a model call
    that hangs) is abandoned with the process: every write is one transaction and the batch's
    messages stay in the queue, delivered again after their visibility timeout on the next
    start.
    """

    name = "memwrite-worker"

    def __init__(
        self,
        runner: LocalRunner,
        guard: AbstractContextManager[Any],
        poll_secs: float = WORKER_POLL_SECS,
    ) -> None:
        self._runner = runner
        self._guard = guard
        self._poll_secs = poll_secs
        self._changed = threading.Condition()
        self._pending = True  # run once at start: work queued before a restart
        self._busy = False
        self._stopped = False
        # A daemon: the process may exit while an abandoned batch still runs (`stop`).
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def notify(self) -> None:
        with self._changed:
            self._pending = True
            self._changed.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """True once everything notified so far has been done (False after `timeout`)."""
        with self._changed:
            return self._changed.wait_for(lambda: not (self._pending or self._busy), timeout)

    def request_stop(self) -> None:
        """Stop after the batch in hand, without waiting for it (`stop` waits)."""
        with self._changed:
            self._stopped = True
            self._changed.notify_all()

    def stop(self, grace_secs: float = WORKER_STOP_GRACE_SECS) -> bool:
        """Stop after the batch in hand; False when it was still running after `grace_secs`
        (abandoned: its messages are delivered again on the next start)."""
        self.request_stop()
        if self._thread.is_alive():
            self._thread.join(grace_secs)
        if self._thread.is_alive():
            logger.warning(
                "a batch still running after %.1f s is abandoned; its messages stay queued "
                "and are delivered again on the next start",
                grace_secs,
            )
            return False
        return True

    def _stopping(self) -> bool:
        return self._stopped  # read between batches: a bool needs no lock

    @abstractmethod
    def _work(self) -> None:
        """One run over what is queued, asking `_stopping` between batches."""

    def _loop(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._pending or self._stopped, self._poll_secs)
                if self._stopped:
                    return
                self._pending, self._busy = False, True
            try:
                with self._guard:
                    self._work()
            except Exception:  # the worker outlives any one run; the queue keeps the work
                logger.exception("%s failed; retrying on the next poll", self.name)
            finally:
                with self._changed:
                    self._busy = False
                    self._changed.notify_all()


class DeliveryWorker(PollingWorker):
    """The webhook delivery lane's consumer (on AWS its own queue and function): every
    delivery due is attempted once per poll, a failed one waits in the queue for its backoff.
    Apart from the queue worker, so a receiver that is down delays no indexing."""

    name = "memwrite-delivery-worker"

    def _work(self) -> None:
        done = self._runner.deliver_webhooks(stop=self._stopping)
        for delivery_id, error in done.errors.items():
            logger.warning("webhook delivery %s failed: %s", delivery_id, error)


class QueueWorker(PollingWorker):
    """The turn queue's consumer: drains it through the pipeline stages and stage 7, then
    tells `deliveries` (the delivery worker) that stage 7 may have queued deliveries."""

    name = "memwrite-queue-worker"

    def __init__(
        self,
        runner: LocalRunner,
        guard: AbstractContextManager[Any],
        poll_secs: float = WORKER_POLL_SECS,
        deliveries: PollingWorker | None = None,
    ) -> None:
        super().__init__(runner, guard, poll_secs)
        self._deliveries = deliveries

    def _work(self) -> None:
        report = self._runner.drain(stop=self._stopping, deliver_webhooks=False)
        for turn_id, error in report.failed.items():
            logger.warning("turn %s dead-lettered: %s", turn_id, error)
        if self._deliveries is not None:
            self._deliveries.notify()


class BackfillWorker(PollingWorker):
    """The continuous backfill: every `BACKFILL_POLL_SECS`, each user's pending episodes go
    through the stages in `observed_at` order on the model budget's spare capacity (its
    backfill lane, below the reserve kept for live turns). When the budget has no spare room
    the pass stops and the episodes stay pending for the next one."""

    name = "memwrite-backfill-worker"
    # With no model, how often pending episodes near their expiry are looked for and warned of.
    NEAR_EXPIRY_CHECK_SECS = 3600.0

    _last_expiry_check: float | None = None

    def _work(self) -> None:
        self._warn_of_expiry()
        results = self._runner.backfill_pending()
        extracted = sum(result.extracted for result in results)
        if extracted:
            logger.info("backfill extracted %d pending episodes", extracted)

    def _warn_of_expiry(self) -> None:
        now = time.monotonic()
        last = self._last_expiry_check
        if last is not None and now - last < self.NEAR_EXPIRY_CHECK_SECS:
            return
        self._last_expiry_check = now
        report = self._runner.near_expiry()
        if report is not None and report.episodes:
            logger.warning(
                "%d pending episodes of %d users expire soon (the first at %s) and no model "
                "is configured to distil them: set ANTHROPIC_API_KEY (or Bedrock) and they "
                "are backfilled",
                report.episodes,
                report.users,
                report.earliest_expires_at.isoformat() if report.earliest_expires_at else "?",
            )


class BackfillJobWorker(PollingWorker):
    """The backfills `POST /v1/users/{user_id}/backfill` handed over (on AWS the backfill
    function's asynchronous invokes), each under the trace the API answered with, then
    indexed (stage 7)."""

    name = "memwrite-backfill-job-worker"

    def _work(self) -> None:
        from memwrite_local.runtime.runner import DrainReport

        results = self._runner.run_backfill_jobs()
        if results:
            self._runner.index_outbox(DrainReport())
            logger.info(
                "backfill jobs: %d users, %d episodes extracted",
                len(results),
                sum(result.extracted for result in results),
            )


class BatchWorker(PollingWorker):
    """The batch lane's rounds (`memwrite.backfill.batch`): the open provider batches polled
    and the ended ones applied (then indexed), what is pending submitted."""

    name = "memwrite-batch-worker"

    @cached_property
    def _lane(self) -> BatchDeps:
        from memwrite.wiring import build_batch_deps

        return build_batch_deps()

    def _work(self) -> None:
        from memwrite.backfill import run_batch_round
        from memwrite.errors import ModelRequired
        from memwrite_local.runtime.runner import DrainReport

        lane = self._lane
        try:
            done = run_batch_round(lane.backfill.configs.for_request, lane)
        except ModelRequired as exc:
            logger.warning("batch backfill skipped: %s", exc)
            return
        self._runner.index_outbox(DrainReport())
        logger.info(
            "batch round: %d batches applied (%d episodes extracted, %d back to pending), "
            "%d submitted, %d episodes in batches",
            len(done.applied_batches),
            done.extracted,
            done.returned_to_pending,
            len(done.submitted_batches),
            done.episodes_in_batches,
        )


def _batch_poll_secs() -> float | None:
    """`backfill.poll_secs` when the deployment's backfill runs in batch mode, else None."""
    from memwrite.config.environment import LambdaEnvironment

    backfill = LambdaEnvironment.load().settings.pipeline.backfill
    return backfill.poll_secs if backfill.mode == "batch" else None


class LocalServer(ThreadingHTTPServer):
    daemon_threads = True  # a hung client thread never blocks shutdown
    block_on_close = False

    def __init__(
        self,
        address: tuple[str, int],
        runner: LocalRunner,
        max_body_bytes: int,
        serialize_pipeline: bool,
        socket_timeout_secs: float,
        *,
        max_import_bytes: int,
    ) -> None:
        # The handlers' Powertools resolvers keep the current event on a module-level object:
        # API calls take turns. moto is not thread-safe at all: then the worker waits too.
        api_lock = threading.Lock()
        self.runner = runner
        self.api_lock = api_lock
        self.max_body_bytes = max_body_bytes
        # An import takes back what an export gave: its own, larger limit.
        self.max_import_bytes = max(max_import_bytes, max_body_bytes)
        self.socket_timeout_secs = socket_timeout_secs
        guard = api_lock if serialize_pipeline else nullcontext()
        self.delivery_worker = DeliveryWorker(runner, guard)
        self.worker = QueueWorker(runner, guard, deliveries=self.delivery_worker)
        # The backfill runs live on the budget's spare capacity, or through the batch lane.
        poll_secs = _batch_poll_secs()
        self.backfill_worker: PollingWorker = (
            BackfillWorker(runner, guard, poll_secs=BACKFILL_POLL_SECS)
            if poll_secs is None
            else BatchWorker(runner, guard, poll_secs)
        )
        self.backfill_job_worker = BackfillJobWorker(runner, guard)
        super().__init__(address, _ApiHandler)
        self.delivery_worker.start()
        self.worker.start()
        self.backfill_worker.start()
        self.backfill_job_worker.start()

    def server_close(self) -> None:
        super().server_close()
        # All wind down at once, not one after the other.
        self.delivery_worker.request_stop()
        self.backfill_worker.request_stop()
        self.backfill_job_worker.request_stop()
        self.worker.stop()
        self.delivery_worker.stop()
        self.backfill_worker.stop()
        self.backfill_job_worker.stop()


class _ApiHandler(BaseHTTPRequestHandler):
    server: LocalServer
    protocol_version = "HTTP/1.1"  # keep-alive: a client's next request reuses the connection

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.socket_timeout_secs)

    def _dispatch(self) -> None:
        if self.command in {"GET", "HEAD"} and urlsplit(self.path).path in DOCS_PATHS:
            self._reply_docs()
            return
        raw = self._read_body()
        if raw is None:
            return
        try:
            body = raw.decode("utf-8") if raw else None
        except UnicodeDecodeError:
            self._refuse(HTTPStatus.BAD_REQUEST, "body", "the body is not valid UTF-8")
            return
        headers = dict(self.headers.items())
        # API Gateway routes on the path; the query string becomes its parameters.
        parts = urlsplit(self.path)
        path = f"{parts.path}?{parts.query}" if parts.query else parts.path
        with self.server.api_lock:
            result = self.server.runner.call(self.command, path, body, headers, api_key=None)
        if self.command == "POST" and result.status < HTTPStatus.BAD_REQUEST:
            self.server.worker.notify()  # as SQS triggers the pipeline (before the reply: a
            # client that waits for the worker after its 202 finds the work already announced)
            if _BACKFILL_PATH.fullmatch(parts.path):
                self.server.backfill_job_worker.notify()  # as Lambda runs an async invoke
        if result.is_json:
            self._reply(result.status, result.body, result.headers)
        else:
            self._reply_raw(result.status, result.text.encode("utf-8"), result.headers)

    def _reply_docs(self) -> None:
        """The API explorer: Swagger UI (bundled with Powertools, so it works offline) on the
        document the API serves at `/v1/openapi.json`; "Try it out" calls this server."""
        with self.server.api_lock:
            document = self.server.runner.call("GET", "/v1/openapi.json", None, {}, api_key=None)
        payload = api_explorer_html(json.dumps(document.body)).encode("utf-8")
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _read_body(self) -> bytes | None:
        """The body, or None after answering: the framing is checked before reading anything,
        and no more than the declared (and allowed) length is ever read."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            self._refuse(HTTPStatus.LENGTH_REQUIRED, "Content-Length", "chunked bodies are refused")
            return None
        declared = self.headers.get("Content-Length") or "0"
        # int() would crash on "abc" or "²"; "-1" would read until the client hangs up.
        if not (declared.isascii() and declared.isdigit()):
            self._refuse(HTTPStatus.BAD_REQUEST, "Content-Length", "not a non-negative integer")
            return None
        length, limit = int(declared), self.server.max_body_bytes
        if self.command == "POST" and _IMPORT_PATH.fullmatch(urlsplit(self.path).path):
            limit = self.server.max_import_bytes
        if length > limit:
            self._refuse(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                "body",
                f"{length} bytes exceeds the limit of {limit}",
                limit=limit,
            )
            return None
        chunks, received = [], 0
        try:
            while received < length:
                chunk = self.rfile.read(min(_READ_CHUNK, length - received))
                if not chunk:
                    break
                chunks.append(chunk)
                received += len(chunk)
        except TimeoutError:
            self._refuse(HTTPStatus.REQUEST_TIMEOUT, "body", "the body did not arrive in time")
            return None
        if received < length:
            self._refuse(HTTPStatus.BAD_REQUEST, "body", "shorter than its Content-Length")
            return None
        return b"".join(chunks)

    def _refuse(self, status: HTTPStatus, field: str, message: str, **extra: Any) -> None:
        # The body may be left unread: this connection cannot carry another request.
        self.close_connection = True
        error = {
            HTTPStatus.REQUEST_ENTITY_TOO_LARGE: "payload_too_large",
            HTTPStatus.REQUEST_TIMEOUT: "request_timeout",
            HTTPStatus.LENGTH_REQUIRED: "length_required",
        }.get(status, "invalid_request")
        body = {"error": error, "errors": [{"field": field, "message": message}], **extra}
        self._reply(status, body, {"Connection": "close"})

    def _reply(self, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
        payload = json.dumps(body).encode("utf-8")
        self._reply_raw(status, payload, {**headers, "Content-Type": "application/json"})

    def _reply_raw(self, status: int, payload: bytes, headers: dict[str, str]) -> None:
        """`payload` as it is, with the handler's headers (its Content-Type: the export's)."""
        self.send_response(status)
        for name, value in headers.items():
            if name.lower() not in {"content-length", "content-type"}:
                self.send_header(name, value)
        content_type = next(
            (v for k, v in headers.items() if k.lower() == "content-type"), "application/json"
        )
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own refusals (bad request line, headers too large, unknown method)
        as JSON; an unknown method is a 405 like any other wrong method."""
        if code == HTTPStatus.NOT_IMPLEMENTED:
            code, message = HTTPStatus.METHOD_NOT_ALLOWED, f"method {self.command} not allowed"
        self.close_connection = True
        status = HTTPStatus(code)
        self.log_error("code %d, message %s", code, message)
        body = {"error": status.phrase.lower().replace(" ", "_"), "message": message or ""}
        self._reply(code, body, {"Connection": "close"})

    # Every method goes to the router: an unrouted one is the API's 404 or 405.
    do_GET = _dispatch  # noqa: N815 (http.server's naming)
    do_POST = _dispatch  # noqa: N815
    do_DELETE = _dispatch  # noqa: N815
    do_PUT = _dispatch  # noqa: N815
    do_PATCH = _dispatch  # noqa: N815
    do_OPTIONS = _dispatch  # noqa: N815
    do_HEAD = _dispatch  # noqa: N815

    def log_message(self, format: str, *args: object) -> None:
        logger.info("%s - %s", self.address_string(), format % args)


def make_server(
    runner: LocalRunner,
    port: int,
    host: str = "127.0.0.1",
    *,
    max_body_bytes: int,
    max_import_bytes: int | None = None,
    serialize_pipeline: bool = False,
    socket_timeout_secs: float = SOCKET_TIMEOUT_SECS,
) -> LocalServer:
    """The API on (host, port) with its workers started; `server_close` stops them all.
    `max_import_bytes` (default: `max_body_bytes`) bounds an import's body."""
    return LocalServer(
        (host, port),
        runner,
        max_body_bytes,
        serialize_pipeline,
        socket_timeout_secs,
        max_import_bytes=max_import_bytes or max_body_bytes,
    )
