"""The embedded default's AWS: moto in-process, with the tables and queue the handlers expect.

Entering `LocalAws` starts moto, creates every table of `memwrite.schema` and the FIFO work
queue, and points the handlers' environment at them; leaving it restores the environment.
API keys: those configured (`MEMWRITE_API_KEYS`, `api_keys` in the config file) if any, else
the one default key `local-dev-key` (tenant `local`); a configured set replaces the default.
Set `AWS_ENDPOINT_URL` to use another emulator or real AWS instead (then nothing is created).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from types import TracebackType

from memwrite.config import load_settings
from memwrite.schema import TABLES

__all__ = ["LOCAL_API_KEY", "LOCAL_TENANT", "LocalAws"]

LOCAL_API_KEY = "local-dev-key"
LOCAL_TENANT = "local"
_REGION = "us-east-1"
_QUEUE_NAME = "memwrite-turns.fifo"


@dataclass(frozen=True)
class LocalResources:
    table_names: dict[str, str]
    queue_url: str


@contextmanager
def _patched_environ(values: dict[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class LocalAws:
    """Context manager: moto running in this process, resources created, environment set."""

    def __init__(self, extra_env: dict[str, str] | None = None) -> None:
        self._extra_env = extra_env or {}
        self._stack = ExitStack()
        self.resources: LocalResources | None = None
        self.uses_default_api_key = False

    def __enter__(self) -> LocalAws:
        from moto import mock_aws

        base_env = {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_DEFAULT_REGION": _REGION,
            # boto3 1.44 sends some calls to account-specific endpoints moto does not route.
            "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
            "POWERTOOLS_TRACE_DISABLED": "true",
            # EMF lines would flood a terminal; tests that check them turn metrics back on.
            "POWERTOOLS_METRICS_DISABLED": "true",
        }
        if not load_settings({**os.environ, **self._extra_env}).api_keys:
            base_env["MEMWRITE_API_KEYS"] = f"{LOCAL_API_KEY}={LOCAL_TENANT}"
            self.uses_default_api_key = True
        self._stack.enter_context(_patched_environ({**base_env, **self._extra_env}))
        self._stack.enter_context(mock_aws())
        # The embedded search index: one file the hype and query handlers share.
        self._index_dir = self._stack.enter_context(tempfile.TemporaryDirectory())
        self.resources = self._create_resources()
        self._stack.enter_context(_patched_environ(self.handler_env()))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stack.close()

    def handler_env(self) -> dict[str, str]:
        assert self.resources is not None
        names = self.resources.table_names
        return {
            **{
                f"{table.logical_name.upper()}_TABLE": names[table.logical_name] for table in TABLES
            },
            "TURN_QUEUE_URL": self.resources.queue_url,
            "MEMWRITE_INDEX_PATH": os.path.join(self._index_dir, "index.sqlite"),
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
        queue_url = sqs.create_queue(
            QueueName=_QUEUE_NAME,
            Attributes={"FifoQueue": "true", "VisibilityTimeout": "30"},
        )["QueueUrl"]
        return LocalResources(table_names=names, queue_url=queue_url)
