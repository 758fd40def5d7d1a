"""The Lambda layer, built without Docker: the runtime dependencies as Lambda wheels
(`pip install --target --platform ...`) plus the `memwrite` library, never `memwrite_local`.

CDK runs `try_bundle` at synth only when the layer's inputs (the pinned dependencies and the
library's files) changed: the asset hash is computed from them first.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import aws_cdk as cdk
import jsii
from aws_cdk import aws_lambda as lambda_

__all__ = [
    "LAMBDA_ARCHITECTURE",
    "LAMBDA_RUNTIME",
    "LOCAL_ONLY_DEPENDENCIES",
    "REPO",
    "handler_code",
    "layer_code",
    "layer_requirements",
]

REPO = Path(__file__).resolve().parents[1]
LIBRARY = REPO / "layers" / "core"
# python3.11 runs on Amazon Linux 2 (glibc 2.26), for which numpy 2.4 ships no wheel;
# python3.12 runs on Amazon Linux 2023. Graviton: ~20 % cheaper per GB-second.
LAMBDA_RUNTIME = lambda_.Runtime.PYTHON_3_12
LAMBDA_ARCHITECTURE = lambda_.Architecture.ARM_64
_WHEEL_PLATFORMS = ("manylinux2014_aarch64", "manylinux_2_28_aarch64")
_PYTHON_VERSION = "3.12"
# The embedded search index (faiss) serves the local mode only; on AWS OpenSearch does.
LOCAL_ONLY_DEPENDENCIES = frozenset({"faiss-cpu"})


def layer_requirements() -> list[str]:
    """The pinned runtime dependencies of `pyproject.toml` (the base and the `server` extra),
    minus the local-only ones."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return [
        requirement
        for requirement in [*project["dependencies"], *project["optional-dependencies"]["server"]]
        if requirement.split("==")[0].split("[")[0] not in LOCAL_ONLY_DEPENDENCIES
    ]


def _library_files() -> list[Path]:
    return sorted(
        p for p in (LIBRARY / "memwrite").rglob("*") if p.is_file() and "__pycache__" not in p.parts
    )


def _layer_hash() -> str:
    digest = hashlib.sha256("\n".join([*layer_requirements(), *_WHEEL_PLATFORMS]).encode())
    for path in _library_files():
        digest.update(str(path.relative_to(LIBRARY)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


@jsii.implements(cdk.ILocalBundling)
class _PipLayerBundling:
    def try_bundle(self, output_dir: str, *, image: cdk.DockerImage, **_: object) -> bool:
        target = Path(output_dir) / "python"
        subprocess.run(
            [
                sys.executable, "-m", "pip", "install", "--quiet", "--target", str(target),
                *(arg for platform in _WHEEL_PLATFORMS for arg in ("--platform", platform)),
                "--implementation", "cp", "--python-version", _PYTHON_VERSION,
                "--only-binary=:all:", *layer_requirements(),
            ],
            check=True,
        )  # fmt: skip
        shutil.copytree(
            LIBRARY / "memwrite",
            target / "memwrite",
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        return True


def layer_code() -> lambda_.Code:
    return lambda_.Code.from_asset(
        str(LIBRARY),
        asset_hash_type=cdk.AssetHashType.CUSTOM,
        asset_hash=_layer_hash(),
        bundling=cdk.BundlingOptions(
            # Never pulled: local bundling succeeds (a Docker image is what CDK falls back to).
            image=cdk.DockerImage.from_registry("public.ecr.aws/sam/build-python3.12"),
            local=_PipLayerBundling(),
        ),
    )


def handler_code() -> lambda_.Code:
    """The thin handlers (`functions/`) and the deployed pipeline settings (`infra/settings/`)."""
    return lambda_.Code.from_asset(
        str(REPO),
        exclude=[
            "*",
            "!functions",
            "!functions/**",
            "!infra",
            "!infra/settings",
            "!infra/settings/*.json",
            "**/__pycache__",
        ],
    )
