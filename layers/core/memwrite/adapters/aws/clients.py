"""boto3 clients for the AWS adapters, built one way: standard-mode retries (throttling is
retried with backoff before an adapter sees an error), short timeouts, and `AWS_ENDPOINT_URL`
honoured for emulators."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_sqs.client import SQSClient
    from mypy_boto3_stepfunctions.client import SFNClient

__all__ = [
    "apigateway_client",
    "bedrock_client",
    "dynamodb_client",
    "events_client",
    "lambda_client",
    "s3_client",
    "sqs_client",
    "stepfunctions_client",
]

_CONFIG = Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=2, read_timeout=5)


def _kwargs(endpoint_url: str | None) -> dict[str, Any]:
    return {"config": _CONFIG, **({"endpoint_url": endpoint_url} if endpoint_url else {})}


def bedrock_client(region: str, endpoint_url: str | None = None) -> Any:
    """Bedrock's control plane (batch inference jobs; no stubs installed)."""
    return boto3.client("bedrock", region_name=region, **_kwargs(endpoint_url))


def apigateway_client(endpoint_url: str | None = None) -> Any:
    """API Gateway's control plane (no stubs installed), for `memwrite keys plan`."""
    return boto3.client("apigateway", **_kwargs(endpoint_url))


def dynamodb_client(endpoint_url: str | None = None) -> DynamoDBClient:
    return boto3.client("dynamodb", **_kwargs(endpoint_url))


def events_client(endpoint_url: str | None = None) -> Any:
    """EventBridge (no stubs installed: the adapter types the one call it makes)."""
    return boto3.client("events", **_kwargs(endpoint_url))


def lambda_client(endpoint_url: str | None = None) -> Any:
    """Lambda (no stubs installed): asynchronous invokes of background jobs (a backfill, a
    topic sweep)."""
    return boto3.client("lambda", **_kwargs(endpoint_url))


def s3_client(endpoint_url: str | None = None) -> Any:
    """S3 (no stubs installed), presigning with SigV4: the signature every region accepts."""
    kwargs = _kwargs(endpoint_url)
    kwargs["config"] = _CONFIG.merge(Config(signature_version="s3v4"))
    return boto3.client("s3", **kwargs)


def sqs_client(endpoint_url: str | None = None) -> SQSClient:
    return boto3.client("sqs", **_kwargs(endpoint_url))


def stepfunctions_client(endpoint_url: str | None = None) -> SFNClient:
    return boto3.client("stepfunctions", **_kwargs(endpoint_url))
