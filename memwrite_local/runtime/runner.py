"""The local runner: the same handlers as on AWS, driven in-process on whichever backend the
environment names (a `memwrite_local.runtime.backend.LocalBackend` sets it).

API calls are routed by the route table (`functions/routes.py`), as API Gateway routes them: a
route that takes a key goes first through the authorizer Lambda (a wrong credential is a 401
before any body is read), then every call becomes a proxy event for the handler of the
function the table names, with the tenant in the request context; `drain` then pulls the queue
(through the `TurnConsumer` port: SQLite or SQS), splits each receive into per-session extract
inputs as the dispatcher does on AWS, and runs the handler of every pipeline stage of
`memwrite.stages.STAGES` on each, in order, passing JSON from one to the next as Step
Functions does. `run_backfill_jobs` runs the backfills the API handed over (on AWS the
backfill function's asynchronous invokes) and `backfill_pending` is one pass of the
continuous backfill (`memwrite serve` runs both on workers of their own). Each drain first
runs the expiry sweep (the AWS schedule's function), so the rows it commits reach stage 7 in
the same drain, and ends with one pass of the webhook delivery lane (`deliver_webhooks`: on
AWS its own queue and function), unless told not to (`memwrite serve` runs the lane on a
worker of its own).
"""

from __future__ import annotations

import importlib
import json
import logging
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from types import ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from functions.routes import ROUTES, Auth, Route
from memwrite.backfill import (
    BackfillResult,
    NearExpiryReport,
    backfill_pending,
    report_near_expiry,
    run_job,
)
from memwrite.config.environment import Backend, LambdaEnvironment
from memwrite.errors import BudgetWait, MemwriteError, WebhookUndelivered
from memwrite.execution.dispatch import coalesce_delay
from memwrite.expiry import ExpirySweep, sweep_expiries
from memwrite.feed.delivery import DeliveryOutcome, attempt_delivery
from memwrite.payloads import ExtractInput, IndexedChange, OutboxChange
from memwrite.schema import PARTITION_KEY, SORT_KEY, outbox_sort_key
from memwrite.stages import pipeline_stages, stream_stages
from memwrite.wiring import (
    build_queue_consumer,
    build_webhook_delivery_deps,
    local_backfill_jobs,
)
from memwrite_local.runtime.backend import LOCAL_API_KEY

if TYPE_CHECKING:
    from memwrite.ports import Delivery

__all__ = [
    "MAX_RECEIVES",
    "ApiResult",
    "DeliveryPass",
    "DrainReport",
    "LocalContext",
    "LocalRunner",
    "api_gateway_event",
]

logger = logging.getLogger(__name__)

MAX_RECEIVES = 3  # deliveries of a failing batch before it is dead-lettered
RECEIVE_BATCH = 10  # one SQS receive: up to 10 messages
# A delivery not deleted within this is delivered again (a consumer that died mid-batch).
VISIBILITY_TIMEOUT_SECS = 30

# Each route of the table (`functions/routes.py`) with its path as a pattern: a `{name}` is one
# path segment, as API Gateway matches it.
_ROUTE_PATTERNS = tuple(
    (route, re.compile(re.sub(r"\{\w+\}", "[^/]+", route.path))) for route in ROUTES
)
AUTHORIZER = "functions.authorizer.handler"
EXPIRE = "functions.expire.handler"
BACKFILL = "functions.backfill.handler"
# Its search records retrievals on a background thread (`ACCESS_UPDATES`).
API_HANDLER = "functions.api.handler"
# API Gateway's answer when the authorizer refuses, shaped as the handlers' own 401.
UNAUTHENTICATED = {"error": "unauthenticated", "message": "missing or unknown credential"}
_OUTBOX_STREAM_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/memwrite-outbox/stream/local"
STREAM_BATCH_SIZE = 100  # records per stream invocation (the event source mapping's BatchSize)


@dataclass
class LocalContext:
    """The attributes of a Lambda context that Powertools reads."""

    function_name: str = "memwrite-local"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:memwrite-local"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


@dataclass
class DeliveryPass:
    """What one pass of the webhook delivery lane did: deliveries accepted by their receiver,
    dropped (their webhook gone from the tenant's settings), left waiting for their backoff
    after a failed attempt, and those that failed otherwise (by delivery id: they come back
    after their visibility timeout, as from the Lambda's batch processor)."""

    delivered: int = 0
    dropped: int = 0
    retrying: int = 0
    errors: dict[str, str] = field(default_factory=dict)


@dataclass
class DrainReport:
    """What a drain produced: how many batches went through every stage, and the turns that
    failed; then what the outbox consumer indexed, and the outbox rows it gave up on (the
    stream's on-failure destination), by `memory_id#rev`.

    Batches are counted, not kept: under a steady load `memwrite serve`'s worker is in one
    drain for as long as the queue refills, and keeping each batch's output grew its memory
    with every request (README "Measured", embedded mode)."""

    completed_batches: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    # Turns put back in the queue to wait for the model budget (`BudgetWait`): not failures.
    budget_waits: int = 0
    # Turns put back to wait for their user's next ones (`extract.coalesce_window_s`).
    coalesce_waits: int = 0
    expiries_announced: int = 0  # by the expiry sweep: each a `memory.expired` row
    indexed: list[IndexedChange] = field(default_factory=list)
    index_failed: dict[str, str] = field(default_factory=dict)
    webhooks: DeliveryPass = field(default_factory=DeliveryPass)


def stream_record(change: OutboxChange, sequence: int) -> dict[str, Any]:
    """An outbox row as the table's stream delivers it to Lambda (an INSERT, NEW_IMAGE)."""
    keys = {
        PARTITION_KEY: {"S": f"{change.tenant}#{change.user_id}"},
        SORT_KEY: {"S": outbox_sort_key(change.memory_id, change.rev)},
    }
    image = dict(keys)
    if change.trace_id is not None:
        image["trace_id"] = {"S": change.trace_id}
    return {
        "eventID": uuid.uuid4().hex,
        "eventName": "INSERT",
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": {
            "Keys": keys,
            "NewImage": image,
            "SequenceNumber": str(sequence),
            "SizeBytes": 100,
            "StreamViewType": "NEW_IMAGE",
        },
        "eventSourceARN": _OUTBOX_STREAM_ARN,
    }


@dataclass(frozen=True)
class ApiResult:
    """A handler's answer: `body` is its JSON (empty for another media type, the export's
    JSON lines), `text` the body as sent."""

    status: int
    headers: dict[str, str]
    body: dict[str, Any]
    text: str = ""

    @property
    def is_json(self) -> bool:
        content_type = next(
            (v for k, v in self.headers.items() if k.lower() == "content-type"), "application/json"
        )
        return content_type.split(";")[0].strip().lower() == "application/json"


def api_gateway_event(
    method: str, path: str, headers: dict[str, str], body: str | None
) -> dict[str, Any]:
    """A REST API (v1) proxy event, as API Gateway would send it."""
    return {
        "resource": path,
        "path": path,
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": {name: [value] for name, value in headers.items()},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": None,
        "stageVariables": None,
        "requestContext": {
            "httpMethod": method,
            "path": path,
            "resourcePath": path,
            "stage": "local",
            "requestId": str(uuid.uuid4()),
            "identity": {"sourceIp": "127.0.0.1"},
        },
        "body": body,
        "isBase64Encoded": False,
    }


class LocalRunner:
    """The handlers of the routes and the pipeline, each a cold start against the backend the
    environment names at construction."""

    def __init__(self) -> None:
        self._consumer = build_queue_consumer()
        self._modules: dict[str, ModuleType] = {}
        for route in ROUTES:
            self._modules[route.module] = importlib.import_module(route.module)
        self._pipeline = [
            importlib.import_module(f"functions.{stage.function_dir}.handler")
            for stage in pipeline_stages()
        ]
        self._stream = [
            importlib.import_module(f"functions.{stage.function_dir}.handler")
            for stage in stream_stages()
        ]
        environment = LambdaEnvironment.load()
        self._single_threaded_backend = environment.backend is not Backend.SQLITE
        self._coalesce_window_s = environment.settings.pipeline.extract.coalesce_window_s
        # A turn held for its user's next ones spends one receive on it, so one more is allowed.
        self._max_receives = MAX_RECEIVES + (1 if self._coalesce_window_s > 0 else 0)
        self._authorizer = importlib.import_module(AUTHORIZER)
        self._authorizer.resolver.cache_clear()  # the keys of this backend's environment
        self._expire = importlib.import_module(EXPIRE)
        self._expire.deps.cache_clear()
        self._backfill = importlib.import_module(BACKFILL)
        self._backfill.deps.cache_clear()
        local_backfill_jobs().take()  # an earlier runner's jobs, lost as with a restart
        self._deliveries = build_webhook_delivery_deps()
        self._sequence = 0
        # Built against this backend, not an earlier one: each runner is a cold start.
        for module in self._modules.values():
            module.deps.cache_clear()
        for module in self._pipeline:
            module.handler.deps.cache_clear()
            module.handler.metering.cache_clear()
        for module in self._stream:
            module.deps.cache_clear()
            module.metering.cache_clear()

    def call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | str | None = None,
        headers: dict[str, str] | None = None,
        api_key: str | None = LOCAL_API_KEY,
    ) -> ApiResult:
        all_headers = {"Content-Type": "application/json", **(headers or {})}
        if api_key is not None:
            all_headers.setdefault("x-api-key", api_key)
        raw = json.dumps(body) if isinstance(body, dict) else body
        path, _, query = path.partition("?")
        route, allowed = self._route(method, path)
        if route is None and allowed:
            return ApiResult(
                405,
                {"Allow": ", ".join(allowed)},
                {"error": "method_not_allowed", "method": method, "allowed": allowed},
            )
        if route is None:
            return ApiResult(404, {}, {"error": "not_found", "path": path})
        event = api_gateway_event(method, path, all_headers, raw)
        if route.auth is Auth.API_KEY:
            tenant = self._authorize(method, path, all_headers)
            if tenant is None:
                return ApiResult(401, {}, UNAUTHENTICATED)
            event["requestContext"]["authorizer"] = {"tenant_id": tenant}
        if query:
            parameters = parse_qs(query, keep_blank_values=True)
            event["queryStringParameters"] = {k: v[-1] for k, v in parameters.items()}
            event["multiValueQueryStringParameters"] = parameters
        response = self._modules[route.module].lambda_handler(event, LocalContext())
        if self._single_threaded_backend:
            # moto is not thread-safe: a search's counter update (on the api handler's
            # background thread) finishes before the next call can read the same items.
            self._modules[API_HANDLER].ACCESS_UPDATES.submit(lambda: None).result()
        payload = response.get("body") or "{}"
        # REST (v1) proxy responses may carry headers in either field; clients see both.
        response_headers = dict(response.get("headers") or {})
        for name, values in (response.get("multiValueHeaders") or {}).items():
            response_headers.setdefault(name, ",".join(values))
        result = ApiResult(int(response["statusCode"]), response_headers, {}, payload)
        return replace(result, body=json.loads(payload)) if result.is_json else result

    def _authorize(self, method: str, path: str, headers: dict[str, str]) -> str | None:
        """The tenant the authorizer Lambda puts into the request context, or None where API
        Gateway answers 401: as on AWS, before the route's handler reads the body."""
        event = {
            "type": "REQUEST",
            "methodArn": f"arn:aws:execute-api:local:000000000000:local/local/{method}{path}",
            "headers": headers,
        }
        try:
            answer = self._authorizer.lambda_handler(event, LocalContext())
        except Exception as exc:  # the authorizer's contract: Exception("Unauthorized") -> 401
            if str(exc) == "Unauthorized":
                return None
            raise
        return str(answer["context"]["tenant_id"])

    def _route(self, method: str, path: str) -> tuple[Route | None, list[str]]:
        """The route of (method, path), or None and the methods the path does take."""
        allowed = []
        for route, pattern in _ROUTE_PATTERNS:
            if pattern.fullmatch(path):
                if method == route.method:
                    return route, []
                allowed.append(route.method)
        return None, allowed

    def drain(
        self, stop: Callable[[], bool] = lambda: False, *, deliver_webhooks: bool = True
    ) -> DrainReport:
        """Run every queued turn through the pipeline stages, as SQS + the state machine would.

        A batch whose stages succeed is deleted from the queue. One that fails (its stage has
        already written error spans) is made visible again and redelivered, as SQS does, up to
        `MAX_RECEIVES` times; then it goes to the dead letters and is reported in `failed`.

        `stop` is asked before each batch (and each outbox batch): once it answers True the
        batch in hand is finished, the rest of the receive is made visible again and the
        drain returns, leaving the backlog queued for the next drain (`memwrite serve` stops
        within seconds of SIGTERM, whatever the backlog).

        Then, with `deliver_webhooks`, one pass of the webhook delivery lane (its report in
        `webhooks`); stage 7 itself makes no HTTP call.
        """
        report = DrainReport(expiries_announced=len(self.sweep_expiries().announced))
        while not stop() and (
            deliveries := self._consumer.receive(RECEIVE_BATCH, VISIBILITY_TIMEOUT_SECS)
        ):
            # One receive -> one execution; one task per tenant, user and session in it.
            batches = ExtractInput.batches_of([delivery.turn for delivery in deliveries])
            for index, batch in enumerate(batches):
                if stop():
                    left = {turn.turn_id for rest in batches[index:] for turn in rest.turns}
                    self._consumer.release([d for d in deliveries if d.turn.turn_id in left])
                    break
                in_batch = {turn.turn_id for turn in batch.turns}
                received = [d for d in deliveries if d.turn.turn_id in in_batch]
                delay = coalesce_delay(
                    batch.turns, self._coalesce_window_s, time.time(), RECEIVE_BATCH
                )
                if delay > 0:
                    # Hidden until the window closes; the group's later turns come with it.
                    self._consumer.release(received, delay)
                    report.coalesce_waits += len(received)
                    continue
                self._settle(received, self._run_stages(batch, report), report)
            # The stream feeds stage 7 while the queue still holds work, as on AWS: under a
            # steady load what was stored becomes searchable without waiting for a quiet queue.
            self.index_outbox(report, stop)
        self.index_outbox(report, stop)  # nothing received: rows left pending by an earlier drain
        if deliver_webhooks:
            report.webhooks = self.deliver_webhooks(stop=stop)
        return report

    def deliver_webhooks(
        self, now: float | None = None, stop: Callable[[], bool] = lambda: False
    ) -> DeliveryPass:
        """One pass of the webhook delivery lane, as its event source and function run it on
        AWS (the library call, with the runner's clock): every delivery visible at `now`
        (default: the time) is attempted once; delivered and dropped ones are deleted, a
        failed one stays hidden for its backoff (`memwrite.feed.delivery.retry_delay`) and a
        message received too often goes to the queue's dead letters. Tests pass a later `now`
        to play the backoff without sleeping (the SQLite queue keeps time by it)."""
        at = time.time() if now is None else now
        done = DeliveryPass()
        queue = self._deliveries.queue
        while not stop() and (
            messages := queue.receive(RECEIVE_BATCH, VISIBILITY_TIMEOUT_SECS, now=at)
        ):
            finished = []
            for message in messages:
                try:
                    outcome = attempt_delivery(message, self._deliveries, now=at)
                except WebhookUndelivered:
                    done.retrying += 1
                    continue
                except Exception as exc:  # the batch processor's boundary, as on AWS
                    done.errors[message.delivery.delivery_id] = f"{type(exc).__name__}: {exc}"
                    continue
                if outcome is DeliveryOutcome.DELIVERED:
                    done.delivered += 1
                else:
                    done.dropped += 1
                finished.append(message)
            queue.delete(finished)
        return done

    def backfill_pending(self) -> list[BackfillResult]:
        """One pass of the continuous backfill (the library call of the backfill function,
        with its deps): every user's pending episodes, in `observed_at` order, on the model
        budget's spare capacity (its backfill lane); none offline, where no model could
        extract them."""
        deps = self._backfill.deps()
        if not deps.has_model:
            return []
        results: list[BackfillResult] = backfill_pending(deps.configs.for_request, deps)
        return results

    def near_expiry(self) -> NearExpiryReport | None:
        """With no model configured, the pending episodes near their expiry (the scheduled
        backfill's check on AWS, which logs and meters them); None when a model distils them."""
        deps = self._backfill.deps()
        if deps.has_model:
            return None
        return report_near_expiry(deps.configs.for_request, deps)

    def run_backfill_jobs(self) -> list[BackfillResult]:
        """The backfills handed over since the last call (`POST /v1/users/{user_id}/backfill`),
        each run as the backfill function runs its event (the library call, with its deps and
        time budget), under the trace the API answered with. A job that fails is logged and
        its episodes stay pending for the continuous backfill."""
        jobs = local_backfill_jobs().take()
        if not jobs:
            return []
        deps = self._backfill.deps()
        left_secs = LocalContext().get_remaining_time_in_millis() / 1000
        budget_secs = max(0.0, left_secs - self._backfill.JOB_RESERVE_SECS)
        results: list[BackfillResult] = []
        for job in jobs:
            config = deps.configs.for_request(job.tenant)
            try:
                results.append(run_job(job, config, deps, budget_secs=budget_secs))
            except MemwriteError:
                logger.exception("backfill of one user failed; its episodes stay pending")
        return results

    def sweep_expiries(self) -> ExpirySweep:
        """One expiry sweep, as the schedule's function runs it on AWS (with its deps; the
        library call, not its handler, whose log lines would go to a command's stdout): the
        passed user expiries it gave a `memory.expired` row, for `index_outbox` to deliver."""
        return sweep_expiries(datetime.now(UTC), self._expire.deps())

    def _settle(
        self, deliveries: list[Delivery], error: str | BudgetWait | None, report: DrainReport
    ) -> None:
        if error is None:
            self._consumer.delete(deliveries)
            return
        if isinstance(error, BudgetWait):
            # Waiting for the model budget is no failure: hidden for the delay, then tried
            # again (extract defers it once `model.max_wait_s` has passed).
            self._consumer.release(deliveries, error.delay_s)
            report.budget_waits += len(deliveries)
            return
        retry = [d for d in deliveries if d.receive_count < self._max_receives]
        self._consumer.release(retry)
        exhausted = [d for d in deliveries if d.receive_count >= self._max_receives]
        self._consumer.dead_letter(exhausted, error)
        report.failed.update(dict.fromkeys((d.turn.turn_id for d in exhausted), error))

    def _run_stages(self, batch: ExtractInput, report: DrainReport) -> str | BudgetWait | None:
        """Each stage's output is the next one's input, as in the state machine."""
        payload: dict[str, Any] = batch.model_dump(mode="json")
        try:
            for handler_module in self._pipeline:
                payload = handler_module.lambda_handler(payload, LocalContext())
        except BudgetWait as wait:
            return wait
        except Exception as exc:  # the Lambda runtime's boundary: any failure is a failed task
            return f"{type(exc).__name__}: {exc}"
        report.completed_batches += 1
        return None

    def index_outbox(self, report: DrainReport, stop: Callable[[], bool] = lambda: False) -> None:
        """Deliver the outbox's pending rows to the stream stages as the DynamoDB stream
        would: batches of INSERT records; a failed record stays pending and comes again, up
        to `MAX_RECEIVES` times, then is given up on (the on-failure destination's job).
        Once `stop` answers True the rows not yet delivered stay pending."""
        attempts: dict[str, int] = {}
        for module in self._stream:
            _, deps = module.deps()
            while not stop():
                changes = [
                    change
                    for change in deps.outbox.pending(STREAM_BATCH_SIZE + len(report.index_failed))
                    if _row_key(change) not in report.index_failed
                ][:STREAM_BATCH_SIZE]
                if not changes:
                    break
                by_sequence: dict[str, OutboxChange] = {}
                for change in changes:
                    self._sequence += 1
                    by_sequence[str(self._sequence)] = change
                records = [stream_record(c, int(seq)) for seq, c in by_sequence.items()]
                result = module.index_batch({"Records": records}, LocalContext())
                report.indexed.extend(result.indexed)
                for sequence, error in result.errors.items():
                    key = _row_key(by_sequence[sequence])
                    attempts[key] = attempts.get(key, 0) + 1
                    if attempts[key] >= MAX_RECEIVES:
                        report.index_failed[key] = error


def _row_key(change: OutboxChange) -> str:
    return outbox_sort_key(change.memory_id, change.rev)
