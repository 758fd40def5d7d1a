"""Stage 7 on AWS: the outbox table's DynamoDB stream -> this Lambda (HyPE indexing).

Each stream record is one outbox row; `memwrite.hype.stage.run` indexes its memory and marks the row
done. Records fail one by one (Powertools `BatchProcessor`, partial batch response): the event
source mapping (`ReportBatchItemFailures`, `BisectBatchOnFunctionError`, a maximum retry count
and an on-failure destination, an SQS queue) retries from the first failed record and sends a
record that keeps failing to the destination, so one poison row never blocks the shard.
Only INSERTs are work: marking a row done (MODIFY) and erasing it (REMOVE) come back on the
stream too and are skipped.
"""

from __future__ import annotations

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
from memwrite.metering import Metering, metering_for
from memwrite.payloads import IndexedChange, OutboxChange
from memwrite.stages import stage_named
from memwrite.tenants import TenantConfigs
from memwrite.wiring import build_metering, build_stage_deps

__all__ = ["BatchResult", "index_batch", "lambda_handler"]

logger = Logger(service="memwrite-hype")
STAGE = stage_named("hype")


@cache
def deps() -> tuple[TenantConfigs, Any]:
    return build_stage_deps(STAGE.name)


@cache
def metering() -> Metering:
    return build_metering()


def index_record(record: DynamoDBRecord) -> IndexedChange | None:
    if record.event_name is not DynamoDBRecordEventName.INSERT:
        return None
    image = record.dynamodb.new_image if record.dynamodb else None
    change = OutboxChange.from_row(image or {})
    configs, stage_deps = deps()
    config = configs.for_request(change.tenant)
    # HyPE's calls are charged to the tenant's part of the model budget, and metered on the
    # tenant's usage with the embeddings.
    with (
        calling_for(caller_of(change.tenant, config.model)),
        metering_for(change.tenant, metering()),
    ):
        result: IndexedChange = STAGE.run(change, config, stage_deps)
    # Ids and timings only: the memory's text never reaches the logs.
    logger.debug("indexed", extra=result.model_dump(mode="json", exclude={"questions"}))
    return result


@dataclass
class BatchResult:
    """The Lambda response (`batchItemFailures`), what each successful record did and why
    each failed record failed (by sequence number)."""

    response: dict[str, Any]
    indexed: list[IndexedChange]
    errors: dict[str, str]


def index_batch(event: dict[str, Any], context: LambdaContext | None = None) -> BatchResult:
    # A batch whose every record failed is still a partial response here (not an exception):
    # the event source mapping retries it the same way.
    processor = BatchProcessor(
        event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False
    )
    with processor(records=event.get("Records", []), handler=index_record, lambda_context=context):
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
