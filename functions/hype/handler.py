"""Stage 7 on AWS: the outbox table's DynamoDB stream -> this Lambda (HyPE indexing).

Each stream record is one outbox row; `memwrite.hype.stage.run_batch` indexes the batch's
memories together (one embedder call, one index write) and marks their rows done. Records
still fail one by one (Powertools `BatchProcessor`, partial batch response): the event source
mapping (`ReportBatchItemFailures`, `BisectBatchOnFunctionError`, a maximum retry count and an
on-failure destination, an SQS queue) retries from the first failed record and sends a record
that keeps failing to the destination, so one poison row never blocks the shard.
Only INSERTs are work: marking a row done (MODIFY) and erasing it (REMOVE) come back on the
stream too and are skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import (
    DynamoDBRecord,
    DynamoDBRecordEventName,
)
from aws_lambda_powertools.utilities.typing import LambdaContext

from memwrite.budget import caller_of, calling_for
from memwrite.config.settings import PipelineConfig
from memwrite.hype.stage import run_batch
from memwrite.metering import Metering, metering_for
from memwrite.payloads import IndexedChange, OutboxChange
from memwrite.stages import stage_named
from memwrite.tenants import TenantConfigs
from memwrite.wiring import build_metering, build_stage_deps

__all__ = ["BatchResult", "index_batch", "lambda_handler"]

logger = Logger(service="memwrite-hype")
STAGE = stage_named("hype")  # its `run` is one row's; the stream's batches go to `run_batch`


@cache
def deps() -> tuple[TenantConfigs, Any]:
    return build_stage_deps(STAGE.name)


@cache
def metering() -> Metering:
    return build_metering()


def change_of(record: DynamoDBRecord) -> OutboxChange | None:
    """The outbox row of an INSERT record (None: not work); a malformed row raises."""
    if record.event_name is not DynamoDBRecordEventName.INSERT:
        return None
    image = record.dynamodb.new_image if record.dynamodb else None
    return OutboxChange.from_row(image or {})


@contextmanager
def tenant_work(tenant: str, config: PipelineConfig) -> Iterator[None]:
    """HyPE's calls are charged to the tenant's part of the model budget, and metered on the
    tenant's usage with the embeddings."""
    with calling_for(caller_of(tenant, config.model)), metering_for(tenant, metering()):
        yield


def outcomes_of(records: list[DynamoDBRecord]) -> list[IndexedChange | Exception | None]:
    """Each record's outcome, in order: the batch's rows indexed together, a record that is
    not an outbox row failed on its own, a record that is not work None."""
    parsed: list[OutboxChange | Exception | None] = []
    for record in records:
        try:
            parsed.append(change_of(record))
        except Exception as exc:  # a poison record: its own failure, never the batch's
            parsed.append(exc)
    configs, stage_deps = deps()
    changes = [item for item in parsed if isinstance(item, OutboxChange)]
    # Each tenant's settings read once for the batch (its rows, scopes and spans all ask).
    config_for = cache(configs.for_request)
    indexed = iter(
        run_batch(
            changes, config_for, stage_deps, lambda tenant: tenant_work(tenant, config_for(tenant))
        )
    )
    return [next(indexed) if isinstance(item, OutboxChange) else item for item in parsed]


@dataclass
class BatchResult:
    """The Lambda response (`batchItemFailures`), what each successful record did and why
    each failed record failed (by sequence number)."""

    response: dict[str, Any]
    indexed: list[IndexedChange]
    errors: dict[str, str]


def index_batch(event: dict[str, Any], context: LambdaContext | None = None) -> BatchResult:
    records = [DynamoDBRecord(raw) for raw in event.get("Records", [])]
    outcomes = iter(outcomes_of(records))

    def report(record: DynamoDBRecord) -> IndexedChange | None:
        # The processor visits the records in order: each gets its outcome, a failure raised.
        outcome = next(outcomes)
        if isinstance(outcome, Exception):
            raise outcome
        if outcome is not None:
            # Ids and timings only: the memory's text never reaches the logs.
            logger.debug("indexed", extra=outcome.model_dump(mode="json", exclude={"questions"}))
        return outcome

    # A batch whose every record failed is still a partial response here (not an exception):
    # the event source mapping retries it the same way.
    processor = BatchProcessor(
        event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False
    )
    with processor(records=event.get("Records", []), handler=report, lambda_context=context):
        processed = processor.process()
    indexed = [result for status, result, _ in processed if status == "success" and result]
    errors = {
        record.dynamodb.sequence_number: str(result)
        for status, result, record in processed
        if status == "fail" and record.dynamodb and record.dynamodb.sequence_number
    }
    return BatchResult(dict(processor.response()), indexed, errors)


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return index_batch(event, context).response
