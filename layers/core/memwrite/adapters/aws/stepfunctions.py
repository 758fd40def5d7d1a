"""`PipelineRunner` on Step Functions: a synchronous Express execution (StartSyncExecution)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from memwrite.ports import PipelineRun

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions.client import SFNClient

__all__ = ["StepFunctionsPipeline"]


class StepFunctionsPipeline:
    def __init__(self, client: SFNClient, state_machine_arn: str) -> None:
        self._client = client
        self._arn = state_machine_arn

    def run(self, name: str, payload: str) -> PipelineRun:
        try:
            result = self._client.start_sync_execution(
                stateMachineArn=self._arn, name=name, input=payload
            )
        except (ClientError, BotoCoreError) as exc:
            # Throttled or unreachable: the messages go back to the queue for a redelivery.
            return PipelineRun(succeeded=False, error=type(exc).__name__)
        if result["status"] == "SUCCEEDED":
            return PipelineRun(succeeded=True)
        return PipelineRun(succeeded=False, error=result.get("error") or result["status"])
