"""The backfill's hand-off on AWS (`memwrite.backfill.ports.BackfillStarter`): an asynchronous
invoke of the backfill function (`InvocationType=Event`). Lambda queues the event and answers
202 at once; the function runs it within its own timeout, retried twice by Lambda on a
failure (its asynchronous invocation's defaults)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from memwrite.backfill.ports import BackfillJob
from memwrite.errors import BackfillNotStarted

__all__ = ["LambdaBackfillStarter"]


class LambdaBackfillStarter:
    def __init__(self, client: Any, function_name: str) -> None:
        self._client = client
        self._function_name = function_name

    def start(self, job: BackfillJob) -> None:
        payload = job.model_dump_json(exclude_none=True).encode()
        try:
            answer = self._client.invoke(
                FunctionName=self._function_name, InvocationType="Event", Payload=payload
            )
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "Unknown")
            raise BackfillNotStarted(f"Lambda Invoke failed: {code}") from exc
        except BotoCoreError as exc:
            raise BackfillNotStarted(f"Lambda Invoke failed: {exc}") from exc
        if answer.get("StatusCode") != 202:
            raise BackfillNotStarted(f"Lambda Invoke answered {answer.get('StatusCode')}")
