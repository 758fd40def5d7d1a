"""Synth every environment once per test session (in-process, ~1 GB RSS, a few seconds each):
bundling is skipped (the layer's pip build is the CLI's job), cdk-nag runs as at deploy time."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import aws_cdk as cdk
from aws_cdk.assertions import Template

from infra.app import build_app
from infra.config import ENVIRONMENTS, EnvConfig
from memwrite.payloads import ItemsPayload
from memwrite.stages import STAGES, StageDef, StagePlacement

# A stream stage shaped like the indexer of issue 10 (its code is not on this branch): the
# stack must give it the outbox stream, the search collection and the outbox-lag alarm.
STREAM_STAGE = StageDef(
    "hype", StagePlacement.STREAM, "persist", ItemsPayload, ItemsPayload, "hype"
)


@dataclass(frozen=True)
class Synthesized:
    config: EnvConfig
    template: Template
    template_file: Path

    @property
    def json(self) -> dict[str, Any]:
        result: dict[str, Any] = self.template.to_json()
        return result


def _synth(config: EnvConfig, outdir: Path, stages: tuple[StageDef, ...] = STAGES) -> Synthesized:
    from infra.stack import MemwriteStack

    app = cdk.App(context={"aws:cdk:bundling-stacks": []}, outdir=str(outdir))
    if stages is STAGES:
        stack = build_app(app, config)
    else:
        from cdk_nag import AwsSolutionsChecks

        stack = MemwriteStack(app, config.stack_name, config=config, stages=stages)
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    app.synth()  # raises ValidationFailed on any unacknowledged cdk-nag finding
    return Synthesized(
        config, Template.from_stack(stack), outdir / f"{config.stack_name}.template.json"
    )


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Synthesized]:
    return {
        name: _synth(config, tmp_path_factory.mktemp(f"cdk-{name}"))
        for name, config in ENVIRONMENTS.items()
    }


@pytest.fixture(scope="session")
def with_stream_stage(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return _synth(
        ENVIRONMENTS["dev"], tmp_path_factory.mktemp("cdk-stream"), (*STAGES, STREAM_STAGE)
    )
