"""`PipelineRunner` on Step Functions: an asynchronous Express execution (StartExecution).

Nothing waits for the run: the state machine routes its own failures (error spans, the
pipeline DLQ). A start that fails (throttled, unreachable) is reported, and the dispatcher
hands its messages back to SQS for a redelivery.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from memwrite.ports import PipelineStart

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions.client import SFNClient

__all__ = ["StepFunctionsPipeline"]


class StepFunctionsPipeline:
    def __init__(self, client: SFNClient, state_machine_arn: str) -> None:
        self._client = client
        self._arn = state_machine_arn

    def start(self, name: str, payload: str) -> PipelineStart:
        try:
            self._client.start_execution(stateMachineArn=self._arn, name=name, input=payload)
        except (ClientError, BotoCoreError) as exc:
            # Throttled or unreachable: the messages go back to the queue for a redelivery.
            return PipelineStart(started=False, error=type(exc).__name__)
        return PipelineStart(started=True)
