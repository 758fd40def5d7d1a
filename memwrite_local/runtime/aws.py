"""moto as the in-process AWS (`--backend moto` and the tests): the tables and queues the
handlers expect.

Entering `LocalAws` starts moto, creates every table of `memwrite.schema`, the FIFO work queue
and its dead-letter queue, the webhook queue (its redrive after `MAX_ATTEMPTS` receives, as
deployed) and its dead-letter queue, and points the handlers' environment at them; leaving it
restores the environment. `AWS_ENDPOINT_URL` points the DynamoDB and SQS adapters at another
emulator or at real AWS.
"""

from __future__ import annotations

import json
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from memwrite.feed.delivery import MAX_ATTEMPTS
from memwrite.schema import TABLES
from memwrite_local.runtime.backend import (
    LOCAL_API_KEY,
    LOCAL_TENANT,
    LocalBackend,
    patched_environ,
)

__all__ = ["LOCAL_API_KEY", "LOCAL_TENANT", "LocalAws"]

_REGION = "us-east-1"
_QUEUE_NAME = "memwrite-turns.fifo"
_DEAD_LETTER_QUEUE_NAME = "memwrite-turns-dead.fifo"
_WEBHOOK_QUEUE_NAME = "memwrite-webhook-deliveries"
_WEBHOOK_DEAD_LETTER_QUEUE_NAME = "memwrite-webhook-deliveries-dead"


@dataclass(frozen=True)
class LocalResources:
    table_names: dict[str, str]
    queue_url: str
    dead_letter_url: str
    webhook_queue_url: str
    webhook_dead_letter_url: str


class LocalAws(LocalBackend):
    """Context manager: moto running in this process, resources created, environment set."""

    description = "moto in-process AWS"

    def __init__(self, extra_env: dict[str, str] | None = None) -> None:
        super().__init__(extra_env)
        self.resources: LocalResources | None = None

    def _start(self, stack: ExitStack) -> dict[str, str]:
        from moto import mock_aws

        stack.enter_context(
            patched_environ(
                {
                    "AWS_ACCESS_KEY_ID": "testing",
                    "AWS_SECRET_ACCESS_KEY": "testing",
                    "AWS_SESSION_TOKEN": "testing",
                    "AWS_DEFAULT_REGION": _REGION,
                    # boto3 1.44 sends some calls to account-specific endpoints moto does not route.
                    "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
                }
            )
        )
        stack.enter_context(mock_aws())
        # The embedded search index: one file the hype and api handlers share.
        self._index_dir = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        self.resources = self._create_resources()
        return self.handler_env()

    def handler_env(self) -> dict[str, str]:
        assert self.resources is not None
        names = self.resources.table_names
        return {
            **{
                f"{table.logical_name.upper()}_TABLE": names[table.logical_name] for table in TABLES
            },
            "TURN_QUEUE_URL": self.resources.queue_url,
            "TURN_DEAD_LETTER_URL": self.resources.dead_letter_url,
            "WEBHOOK_QUEUE_URL": self.resources.webhook_queue_url,
            "WEBHOOK_DEAD_LETTER_URL": self.resources.webhook_dead_letter_url,
            "MEMWRITE_INDEX_PATH": str(self._index_dir / "index.sqlite"),
        }

    @staticmethod
    def _create_resources() -> LocalResources:
        import boto3

        dynamodb = boto3.client("dynamodb", region_name=_REGION)
        names: dict[str, str] = {}
        for table in TABLES:
            name = f"memwrite-{table.logical_name}"
            dynamodb.create_table(**table.create_table_kwargs(name))
            if table.ttl_attribute:
                dynamodb.update_time_to_live(
                    TableName=name,
                    TimeToLiveSpecification={
                        "Enabled": True,
                        "AttributeName": table.ttl_attribute,
                    },
                )
            names[table.logical_name] = name
        sqs = boto3.client("sqs", region_name=_REGION)
        queue_url, dead_letter_url = (
            sqs.create_queue(
                QueueName=name, Attributes={"FifoQueue": "true", "VisibilityTimeout": "30"}
            )["QueueUrl"]
            for name in (_QUEUE_NAME, _DEAD_LETTER_QUEUE_NAME)
        )
        webhook_dead_letter_url = sqs.create_queue(QueueName=_WEBHOOK_DEAD_LETTER_QUEUE_NAME)[
            "QueueUrl"
        ]
        dead_letter_arn = sqs.get_queue_attributes(
            QueueUrl=webhook_dead_letter_url, AttributeNames=["QueueArn"]
        )["Attributes"]["QueueArn"]
        redrive = {"deadLetterTargetArn": dead_letter_arn, "maxReceiveCount": MAX_ATTEMPTS}
        webhook_queue_url = sqs.create_queue(
            QueueName=_WEBHOOK_QUEUE_NAME,
            Attributes={"VisibilityTimeout": "30", "RedrivePolicy": json.dumps(redrive)},
        )["QueueUrl"]
        return LocalResources(
            names, queue_url, dead_letter_url, webhook_queue_url, webhook_dead_letter_url
        )
