"""The one factory behind every pipeline-stage Lambda: parse the task input with the stage's
input model, call the stage's `run`, return its output model as JSON.

Which model, which function and which adapters: all from `memwrite.stages.STAGES` and
`memwrite.wiring`. Errors propagate: `TransientError` subclasses match the state machine's
Retry, everything else its Catch (the DLQ); each stage writes its error spans first.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from memwrite.budget import Lane, caller_of, calling_for
from memwrite.metering import Metering, metering_for
from memwrite.stages import StagePlacement, stage_named
from memwrite.tenants import TenantConfigs
from memwrite.wiring import build_metering, build_stage_deps

__all__ = ["StageHandler", "stage_handler"]

Handler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]


class StageHandler:
    """A Lambda handler for one pipeline stage; `deps` is built once per instance (cold start)."""

    def __init__(self, name: str) -> None:
        self.stage = stage_named(name)
        if self.stage.placement is not StagePlacement.PIPELINE:
            raise ValueError(f"{name} is not a pipeline stage")
        self.logger = Logger(service=f"memwrite-{self.stage.function_dir.replace('_', '-')}")
        self.lambda_handler: Handler = self.logger.inject_lambda_context(clear_state=True)(
            self._handle
        )

    @cache  # noqa: B019 (one handler per Lambda instance, alive as long as it)
    def deps(self) -> tuple[TenantConfigs, Any]:
        return build_stage_deps(self.stage.name)

    @cache  # noqa: B019 (as `deps`)
    def metering(self) -> Metering:
        return build_metering()

    def _handle(self, event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        configs, deps = self.deps()
        payload: Any = self.stage.input_model.model_validate(event)
        # Every stage's input names its tenant; a tenant may override the pipeline's config.
        config = configs.for_request(payload.tenant)
        # Its model calls are charged to the tenant's part of the model budget, and metered
        # on the tenant's usage with its embeddings.
        lane = Lane.BACKFILL if getattr(payload, "backfill", False) else Lane.LIVE
        with (
            calling_for(caller_of(payload.tenant, config.model, lane)),
            metering_for(payload.tenant, self.metering()),
        ):
            output = self.stage.run(payload, config, deps)
        result: dict[str, Any] = output.model_dump(mode="json")
        return result


def stage_handler(name: str) -> StageHandler:
    return StageHandler(name)
