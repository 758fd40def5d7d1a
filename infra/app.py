"""`python -m infra.app` (what `cdk.json` runs): one stack for the environment named by
`-c env=dev|staging|prod` (default dev), checked by cdk-nag's AwsSolutions pack."""

from __future__ import annotations

import os

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from infra.config import EnvConfig, config_for
from infra.stack import MemwriteStack

__all__ = ["build_app", "main"]


def build_app(app: cdk.App, config: EnvConfig) -> MemwriteStack:
    account = config.account or os.environ.get("CDK_DEFAULT_ACCOUNT")
    region = config.region or os.environ.get("CDK_DEFAULT_REGION")
    stack = MemwriteStack(
        app,
        config.stack_name,
        config=config,
        env=cdk.Environment(account=account, region=region),
        description=f"memwrite agent-memory write pipeline ({config.name})",
    )
    cdk.Tags.of(stack).add("app", "memwrite")
    cdk.Tags.of(stack).add("environment", config.name)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return stack


def main() -> None:
    app = cdk.App()
    build_app(app, config_for(str(app.node.try_get_context("env") or "dev")))
    app.synth()


if __name__ == "__main__":
    main()
