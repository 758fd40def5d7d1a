"""Synth every environment once per test session (in-process, ~1 GB RSS, a few seconds each):
bundling is skipped (the layer's pip build is the CLI's job), cdk-nag runs as at deploy time.

Under pytest-xdist the workers share the synthesized templates: each environment is
synthesized by one worker (a file lock in the session's temporary directory, the pattern of
pytest-xdist's "Making session-scoped fixtures execute only once"); the others read its
template once it has passed cdk-nag."""

from __future__ import annotations

import json
import os
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock, Timeout

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import aws_cdk as cdk
from aws_cdk.assertions import Template

from infra.app import build_app
from infra.config import ENVIRONMENTS, EnvConfig


@dataclass(frozen=True)
class Synthesized:
    config: EnvConfig
    template: Template  # for aws_cdk.assertions' matchers
    template_file: Path

    @property
    def json(self) -> dict[str, Any]:
        """The template, parsed anew for each caller (a few ms; `Template.to_json` crosses to
        the jsii process, a fraction of a second for each of the many calls of some tests)."""
        result: dict[str, Any] = json.loads(self.template_file.read_text(encoding="utf-8"))
        return result


def _synth(config: EnvConfig, outdir: Path) -> Synthesized:
    app = cdk.App(context={"aws:cdk:bundling-stacks": []}, outdir=str(outdir))
    stack = build_app(app, config)
    app.synth()  # raises ValidationFailed on any unacknowledged cdk-nag finding
    return Synthesized(config, Template.from_stack(stack), _template_file(config, outdir))


def _template_file(config: EnvConfig, outdir: Path) -> Path:
    return outdir / f"{config.stack_name}.template.json"


def _synth_or_read(config: EnvConfig, outdir: Path) -> Synthesized:
    """The environment synthesized here, or read from the worker that did it (its lock held)."""
    passed = outdir.with_suffix(".passed")  # written only after a synth cdk-nag passed
    if not passed.exists():
        synth = _synth(config, outdir)
        passed.touch()
        return synth
    template_file = _template_file(config, outdir)
    template = Template.from_json(json.loads(template_file.read_text(encoding="utf-8")))
    return Synthesized(config, template, template_file)


def _shared_by_workers(shared: Path) -> dict[str, Synthesized]:
    """Each environment synthesized by the first worker free to: one busy with another
    worker's lock takes the next, and waits only once no environment is left to take."""
    built: dict[str, Synthesized] = {}
    while len(built) < len(ENVIRONMENTS):
        left = [name for name in ENVIRONMENTS if name not in built]
        for name in left:
            wait = -1 if name == left[-1] else 0  # another worker's: back to it later
            with suppress(Timeout), FileLock(shared / f"cdk-{name}.lock", timeout=wait):
                built[name] = _synth_or_read(ENVIRONMENTS[name], shared / f"cdk-{name}")
    return {name: built[name] for name in ENVIRONMENTS}


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> dict[str, Synthesized]:
    if worker_id == "master":  # no xdist: nobody to share with
        return {
            name: _synth(config, tmp_path_factory.mktemp(f"cdk-{name}"))
            for name, config in ENVIRONMENTS.items()
        }
    # This session's temporary directory, common to its workers
    return _shared_by_workers(tmp_path_factory.getbasetemp().parent)
