"""A topic sweep handed to the expire function (`memwrite.edit.ports.TopicSweeps`), invoked
asynchronously: Lambda queues the event and retries a failed run twice, so the settings
request answers at once and the sweep (a scan of the tenant's keys, then per user queries)
never runs on it."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from memwrite.edit.ports import TOPIC_SWEEP_EVENT, TopicSweep
from memwrite.errors import StoreUnavailable

__all__ = ["LambdaTopicSweeps"]


class LambdaTopicSweeps:
    def __init__(self, client: Any, function_name: str) -> None:
        self._client = client
        self._function = function_name

    def start(self, sweep: TopicSweep) -> None:
        payload = {TOPIC_SWEEP_EVENT: sweep.model_dump(mode="json")}
        try:
            self._client.invoke(
                FunctionName=self._function,
                InvocationType="Event",
                Payload=json.dumps(payload).encode(),
            )
        except ClientError as exc:
            raise StoreUnavailable(f"Lambda Invoke of {self._function} failed: {exc}") from exc
