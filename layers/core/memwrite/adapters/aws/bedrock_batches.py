"""The batch lane over Bedrock batch inference (`memwrite.backfill.ports.ModelBatches`), for the
provider `bedrock`.

Submitting writes one JSONL object to the batch bucket, a line per request: `{"recordId": the
custom id, "modelInput": the InvokeModel body}`, the body being the very Messages API request
a live extraction sends through `AnthropicBedrock` (`StructuredClient.request`, its model moved
to the job and `anthropic_version` added, as the SDK does), then `CreateModelInvocationJob`
runs it as the batch service role; the job's ARN is the batch id. `GetModelInvocationJob`
gives its status. Bedrock writes one `<input file>.out` JSONL under the job's output prefix,
each line with `modelOutput` (the InvokeModel answer: a Messages API message) or `error`.
A job that failed, was stopped or expired is FAILED as a whole: its episodes go back to
pending. A job needs at least `bedrock_min_records` records (Bedrock's quota).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from memwrite.adapters.anthropic.client import StructuredClient
from memwrite.backfill.ports import BatchAnswer, BatchRequest, BatchState
from memwrite.config.settings import BackfillConfig, ExtractConfig
from memwrite.errors import LlmRequestRejected, LlmUnavailable, MalformedLlmOutput
from memwrite.ids import content_hash
from memwrite.model_ports import LlmCall
from memwrite.prompts.extract import ExtractionResult

__all__ = ["JOB_NAME_PREFIX", "KEY_PREFIX", "BedrockBatchInference", "BedrockJobs"]

KEY_PREFIX = "batch/"  # under it: input/<job name>.jsonl and output/<job name>/
# The InvokeModel body's version field for Claude on Bedrock (what AnthropicBedrock sends).
_BEDROCK_VERSION = "bedrock-2023-05-31"
_ENDED = frozenset({"Completed", "PartiallyCompleted"})
_FAILED = frozenset({"Failed", "Stopped", "Expired"})  # the others are still under way
JOB_NAME_PREFIX = "memwrite-"  # every job's name starts so; the listing reads only those
# The listing's first page holds the open jobs and this many more (jobs another worker made
# since), at most the API's 1,000; the next pages (an account with many newer jobs) hold
# `_LIST_PAGE`.
_LIST_SLACK = 10
_MAX_LIST_PAGE = 1_000
_LIST_PAGE = 100
# Jobs a round lists at most: open jobs are recent, so they are on the first pages.
_MAX_LISTED = 500
_TRANSIENT_CODES = frozenset(
    {"ThrottlingException", "ServiceUnavailableException", "InternalServerException"}
)


@dataclass(frozen=True)
class BedrockJobs:
    """Where the jobs run: the boto3 "bedrock" and "s3" clients (no stubs installed), the
    bucket for their input and output, and the service role Bedrock runs them as."""

    bedrock: Any
    s3: Any
    bucket: str
    role_arn: str


def _model_error(exc: ClientError | BotoCoreError, operation: str) -> Exception:
    if isinstance(exc, ClientError):
        code = exc.response.get("Error", {}).get("Code", "")
        if code not in _TRANSIENT_CODES:
            return LlmRequestRejected(f"Bedrock {operation} refused: {code}")
    return LlmUnavailable(f"Bedrock {operation} failed: {type(exc).__name__}")


def _state_of(status: str) -> BatchState:
    if status in _ENDED:
        return BatchState.ENDED
    return BatchState.FAILED if status in _FAILED else BatchState.IN_PROGRESS


class BedrockBatchInference:
    """`ModelBatches` over Bedrock's model invocation jobs, input and output in S3."""

    def __init__(self, config: ExtractConfig, backfill: BackfillConfig, jobs: BedrockJobs) -> None:
        # Builds the requests and reads the answers; it makes no call itself.
        self._client = StructuredClient(
            config, ExtractionResult, max_tokens=config.max_output_tokens, bare_schema=True
        )
        self._jobs = jobs
        self._min_records = backfill.bedrock_min_records
        self._timeout_hours = backfill.bedrock_timeout_hours
        self._price_factor = backfill.batch_price_factor

    @property
    def min_requests(self) -> int:
        return self._min_records

    def _record(self, request: BatchRequest) -> str:
        body: dict[str, Any] = dict(
            self._client.request(
                request.prompt.system, request.prompt.messages, model=request.model
            )
        )
        del body["model"]  # the job's, not the record's
        body["anthropic_version"] = _BEDROCK_VERSION
        return json.dumps({"recordId": request.custom_id, "modelInput": body})

    def submit(self, model: str, requests: Sequence[BatchRequest]) -> str:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        digest = content_hash(model, *sorted(request.custom_id for request in requests))
        name = f"{JOB_NAME_PREFIX}{stamp}-{digest[:16]}"  # job names are unique per account
        key = f"{KEY_PREFIX}input/{name}.jsonl"
        jobs = self._jobs
        try:
            jobs.s3.put_object(
                Bucket=jobs.bucket,
                Key=key,
                Body="\n".join(self._record(request) for request in requests).encode(),
                ContentType="application/jsonl",
                ServerSideEncryption="AES256",
            )
        except (ClientError, BotoCoreError) as exc:
            raise _model_error(exc, "PutObject (batch input)") from exc
        try:
            response = jobs.bedrock.create_model_invocation_job(
                jobName=name,
                clientRequestToken=name,  # a retried call makes no second job
                roleArn=jobs.role_arn,
                modelId=model,
                inputDataConfig={
                    "s3InputDataConfig": {
                        "s3Uri": f"s3://{jobs.bucket}/{key}",
                        "s3InputFormat": "JSONL",
                    }
                },
                outputDataConfig={
                    "s3OutputDataConfig": {
                        "s3Uri": f"s3://{jobs.bucket}/{KEY_PREFIX}output/{name}/"
                    }
                },
                timeoutDurationInHours=self._timeout_hours,
            )
        except (ClientError, BotoCoreError) as exc:
            raise _model_error(exc, "CreateModelInvocationJob") from exc
        job_arn: str = response["jobArn"]
        return job_arn

    def _job(self, batch_id: str) -> dict[str, Any]:
        try:
            job: dict[str, Any] = self._jobs.bedrock.get_model_invocation_job(
                jobIdentifier=batch_id
            )
        except (ClientError, BotoCoreError) as exc:
            raise _model_error(exc, "GetModelInvocationJob") from exc
        return job

    def state(self, batch_id: str) -> BatchState:
        return _state_of(self._job(batch_id)["status"])

    def states(self, batch_ids: Sequence[str]) -> dict[str, BatchState]:
        """From the account's listing of memwrite's jobs (newest first), read until every one
        is found and for at most `_MAX_LISTED` jobs: one request a round while the open jobs
        are recent, instead of one per job, its page the size of the open jobs (and
        `_LIST_SLACK` more) rather than a hundred mostly ended. One the listing does not show
        is asked for on its own."""
        wanted = set(batch_ids)
        found: dict[str, BatchState] = {}
        if not wanted:
            return found
        page_size = min(_MAX_LIST_PAGE, len(wanted) + _LIST_SLACK)
        listed = 0
        after: dict[str, str] = {}
        try:
            while len(found) < len(wanted) and listed < _MAX_LISTED:
                page = self._jobs.bedrock.list_model_invocation_jobs(
                    nameContains=JOB_NAME_PREFIX,
                    sortBy="CreationTime",
                    sortOrder="Descending",
                    maxResults=page_size,
                    **after,
                )
                jobs = page.get("invocationJobSummaries", [])
                listed += len(jobs)
                found.update(
                    (job["jobArn"], _state_of(job["status"]))
                    for job in jobs
                    if job["jobArn"] in wanted
                )
                if not page.get("nextToken") or not jobs:
                    break
                after, page_size = {"nextToken": page["nextToken"]}, _LIST_PAGE
        except (ClientError, BotoCoreError) as exc:
            raise _model_error(exc, "ListModelInvocationJobs") from exc
        return {batch_id: found.get(batch_id) or self.state(batch_id) for batch_id in batch_ids}

    def answers(self, batch_id: str) -> list[BatchAnswer]:
        output = self._job(batch_id)["outputDataConfig"]["s3OutputDataConfig"]["s3Uri"]
        bucket, _, prefix = output.removeprefix("s3://").partition("/")
        answers: list[BatchAnswer] = []
        try:
            pages = self._jobs.s3.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=prefix
            )
            for page in pages:
                for entry in page.get("Contents", []):
                    # One `.jsonl.out` per input file (the job's manifest holds only counts).
                    if entry["Key"].endswith(".jsonl.out"):
                        body = self._jobs.s3.get_object(Bucket=bucket, Key=entry["Key"])["Body"]
                        text = body.read().decode("utf-8")
                        answers.extend(
                            self._answer(json.loads(line))
                            for line in text.splitlines()
                            if line.strip()
                        )
        except (ClientError, BotoCoreError) as exc:
            raise _model_error(exc, "GetObject (batch output)") from exc
        return answers

    def _answer(self, record: dict[str, Any]) -> BatchAnswer:
        from anthropic.types import Message

        custom_id = str(record["recordId"])
        output = record.get("modelOutput")
        if output is None:
            error = record.get("error") or {}
            return BatchAnswer(custom_id, None, error=f"errored: {error.get('errorCode', '?')}")
        message = Message.model_validate(output)
        try:
            parsed, usage = self._client.answer(
                message, model=message.model, price_factor=self._price_factor
            )
        except MalformedLlmOutput as exc:
            return BatchAnswer(custom_id, None, error=type(exc).__name__, usage=exc.usage)
        return BatchAnswer(custom_id, LlmCall(result=parsed, usage=usage))
