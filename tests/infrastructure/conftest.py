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


@dataclass(frozen=True)
class Synthesized:
    config: EnvConfig
    template: Template
    template_file: Path

    @property
    def json(self) -> dict[str, Any]:
        result: dict[str, Any] = self.template.to_json()
        return result


def _synth(config: EnvConfig, outdir: Path) -> Synthesized:
    app = cdk.App(context={"aws:cdk:bundling-stacks": []}, outdir=str(outdir))
    stack = build_app(app, config)
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
