"""The tables (from `memwrite.schema`, never re-declared here), the queues with their DLQs and
the exports bucket."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from memwrite.schema import TABLES, StreamView, TableSchema

__all__ = ["EXPORTS_EXPIRY_DAYS", "ExportsBucket", "Queues", "Tables"]

EXPORTS_EXPIRY_DAYS = 1  # a presigned URL lives 15 minutes; the object a day at most

_STREAM_VIEWS = {
    StreamView.NEW_IMAGE: dynamodb.StreamViewType.NEW_IMAGE,
    StreamView.NEW_AND_OLD_IMAGES: dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
}


def _string_key(name: str) -> dynamodb.Attribute:
    # Every key attribute of memwrite's schema is a string (TableSchema.create_table_kwargs).
    return dynamodb.Attribute(name=name, type=dynamodb.AttributeType.STRING)


class Tables(Construct):
    """One on-demand table per `memwrite.schema.TABLES` entry: PITR, AWS-managed encryption,
    TTL and streams as the schema says; `by_name` is keyed by the schema's logical name."""

    def __init__(self, scope: Construct, construct_id: str, *, retain: bool) -> None:
        super().__init__(scope, construct_id)
        self.by_name: dict[str, dynamodb.Table] = {
            schema.logical_name: self._table(schema, retain) for schema in TABLES
        }

    def _table(self, schema: TableSchema, retain: bool) -> dynamodb.Table:
        table = dynamodb.Table(
            self,
            schema.logical_name.title().replace("_", ""),
            partition_key=_string_key(schema.partition_key),
            sort_key=_string_key(schema.sort_key) if schema.sort_key else None,
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            time_to_live_attribute=schema.ttl_attribute,
            stream=_STREAM_VIEWS[schema.stream] if schema.stream else None,
            removal_policy=cdk.RemovalPolicy.RETAIN if retain else cdk.RemovalPolicy.DESTROY,
        )
        for index in schema.indexes:
            table.add_global_secondary_index(
                index_name=index.name,
                partition_key=_string_key(index.partition_key),
                sort_key=_string_key(index.sort_key) if index.sort_key else None,
                projection_type=dynamodb.ProjectionType.KEYS_ONLY
                if index.keys_only
                else dynamodb.ProjectionType.ALL,
            )
        return table


def _queue(scope: Construct, construct_id: str, **kwargs: object) -> sqs.Queue:
    return sqs.Queue(
        scope,
        construct_id,
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        **kwargs,  # type: ignore[arg-type]  # CDK's keyword arguments, passed through
    )


class Queues(Construct):
    """The turn queue (FIFO: per-user order where the queue allows it) and the DLQs.

    The turn queue is a high-throughput FIFO queue: deduplication and the throughput quota
    apply per message group (`message_group_id`: tenant and user), not to the whole queue
    (300 sends a second without batching), so it scales with the number of users.

    - `turns_dlq`: turns whose executions kept failing as a whole (SQS redrive).
    - `pipeline_dlq`: batches a stage gave up on (the state machine's Catch), with the stage and
      error; standard, since the failure path has no ordering to keep.
    - `stream_dlq`: outbox stream records the indexer could not process (on-failure destination).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        visibility_timeout: cdk.Duration,
        max_receives: int,
    ) -> None:
        super().__init__(scope, construct_id)
        retention = cdk.Duration.days(14)
        self.turns_dlq = _queue(self, "TurnsDlq", fifo=True, retention_period=retention)
        self.turns = _queue(
            self,
            "Turns",
            fifo=True,
            content_based_deduplication=False,  # the ingest API sends the turn id
            # High throughput: a turn id is unique within its user's group already.
            deduplication_scope=sqs.DeduplicationScope.MESSAGE_GROUP,
            fifo_throughput_limit=sqs.FifoThroughputLimit.PER_MESSAGE_GROUP_ID,
            visibility_timeout=visibility_timeout,
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.turns_dlq, max_receive_count=max_receives
            ),
        )
        self.pipeline_dlq = _queue(self, "PipelineDlq", retention_period=retention)
        self.stream_dlq = _queue(self, "StreamDlq", retention_period=retention)
        self.dead_letter_queues = (self.turns_dlq, self.pipeline_dlq, self.stream_dlq)
        for dlq in (self.pipeline_dlq, self.stream_dlq):
            cdk.Validations.of(dlq).acknowledge(
                cdk.Acknowledgment(
                    id="AwsSolutions-SQS3",
                    reason="A dead-letter queue itself: the state machine's failure path and "
                    "the stream event source's on-failure destination send to it (not an SQS "
                    "redrive, which cdk-nag recognises).",
                )
            )


class ExportsBucket(Construct):
    """Where the API function puts exports too large for one response (`EXPORTS_BUCKET`):
    private, SSE-S3, TLS only, each object deleted after `EXPORTS_EXPIRY_DAYS`."""

    def __init__(self, scope: Construct, construct_id: str, *, retain: bool) -> None:
        super().__init__(scope, construct_id)
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            lifecycle_rules=[s3.LifecycleRule(expiration=cdk.Duration.days(EXPORTS_EXPIRY_DAYS))],
            removal_policy=cdk.RemovalPolicy.RETAIN if retain else cdk.RemovalPolicy.DESTROY,
        )
        cdk.Validations.of(self.bucket).acknowledge(
            cdk.Acknowledgment(
                id="AwsSolutions-S1",
                reason="Short-lived copies of exports their owners requested (the API's access "
                "log has each request); a URL lives 15 minutes and an object a day.",
            )
        )
