"""The batch lane on Bedrock batch inference: boto3's "bedrock" client under botocore's Stubber
(CreateModelInvocationJob, GetModelInvocationJob with the API's own shapes), S3 on moto. The
input is one JSONL object of `{recordId, modelInput}` lines, each the InvokeModel body of the
live request; the output `.jsonl.out` lines carry `modelOutput` or `error`; a job that expired
puts its episodes back to pending."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber
from moto import mock_aws

from memwrite.adapters.aws.bedrock_batches import BedrockBatchInference, BedrockJobs
from memwrite.backfill import BatchDeps, BatchRound, run_batch_round
from memwrite.backfill.batch import apply_batch
from memwrite.backfill.ports import BatchState
from memwrite.config.settings import BackfillConfig, ExtractConfig
from memwrite.errors import LlmRequestRejected
from memwrite.wiring import build_batch_deps
from tests.integration.conftest import Local, MakeLocal
from tests.integration.test_batch_lane import BATCH_CONFIG, outage, statuses
from tests.integration.test_episodes_outage import ANSWERS, memory_state
from tests.recorded_api import recorded

BUCKET = "memwrite-batch"
ROLE = "arn:aws:iam::123456789012:role/memwrite-batch"
JOB = "arn:aws:bedrock:us-east-1:123456789012:model-invocation-job/abc123xyz"


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=BUCKET)
        yield


class FakeBedrock:
    """A stubbed "bedrock" client and the S3 side of its jobs (moto)."""

    def __init__(self, *, min_records: int = 1) -> None:
        self.client = boto3.client("bedrock", region_name="us-east-1")
        self.stub = Stubber(self.client)
        self.stub.activate()
        self.s3 = boto3.client("s3", region_name="us-east-1")
        self.lane_batches = BedrockBatchInference(
            ExtractConfig(),
            BackfillConfig(bedrock_min_records=min_records),
            BedrockJobs(bedrock=self.client, s3=self.s3, bucket=BUCKET, role_arn=ROLE),
        )

    def expect_create(self) -> None:
        self.stub.add_response(
            "create_model_invocation_job",
            {"jobArn": JOB},
            {
                "jobName": ANY,
                "clientRequestToken": ANY,
                "roleArn": ROLE,
                "modelId": "claude-haiku-4-5",
                "inputDataConfig": ANY,
                "outputDataConfig": ANY,
                "timeoutDurationInHours": 24,
            },
        )

    def expect_get(self, status: str, times: int = 1) -> None:
        for _ in range(times):
            self.stub.add_response(
                "get_model_invocation_job", self.summary(JOB, status), {"jobIdentifier": JOB}
            )

    def expect_list(
        self,
        status: str,
        *,
        job: str = JOB,
        jobs: int = 1,
        after: str | None = None,
        next_token: str | None = None,
        max_results: int = 11,
    ) -> None:
        """A page of the listing of memwrite's jobs, newest first: `jobs` jobs, the first
        `job`, the rest others; asked for `max_results` after the page whose token is
        `after`, and `next_token` when another page follows."""
        summaries = [self.summary(job, status)] + [
            self.summary(f"{JOB}-other-{n}", "InProgress") for n in range(jobs - 1)
        ]
        page: dict[str, Any] = {"invocationJobSummaries": summaries}
        if next_token is not None:
            page["nextToken"] = next_token
        asked: dict[str, Any] = {
            "nameContains": "memwrite-",
            "sortBy": "CreationTime",
            "sortOrder": "Descending",
            "maxResults": max_results,
        }
        if after is not None:
            asked["nextToken"] = after
        self.stub.add_response("list_model_invocation_jobs", page, asked)

    def summary(self, job: str, status: str) -> dict[str, Any]:
        return {
            "jobArn": job,
            "jobName": "memwrite-job",
            "modelId": "claude-haiku-4-5",
            "roleArn": ROLE,
            "status": status,
            "submitTime": datetime(2026, 11, 27, tzinfo=UTC),
            "inputDataConfig": {
                "s3InputDataConfig": {"s3Uri": f"s3://{BUCKET}/batch/input/memwrite-job.jsonl"}
            },
            "outputDataConfig": {
                "s3OutputDataConfig": {"s3Uri": f"s3://{BUCKET}/batch/output/memwrite-job/"}
            },
        }

    def input_records(self) -> list[dict[str, Any]]:
        [entry] = self.s3.list_objects_v2(Bucket=BUCKET, Prefix="batch/input/")["Contents"]
        body = self.s3.get_object(Bucket=BUCKET, Key=entry["Key"])["Body"].read()
        return [json.loads(line) for line in body.decode().splitlines()]

    def write_output(self, records: list[dict[str, Any]]) -> None:
        """What Bedrock writes when the job is done: `<job id>/<input file>.out`, a manifest."""
        lines = "\n".join(json.dumps(record) for record in records)
        prefix = "batch/output/memwrite-job/abc123xyz/"
        self.s3.put_object(Bucket=BUCKET, Key=f"{prefix}memwrite-job.jsonl.out", Body=lines)
        manifest = json.dumps({"totalRecordCount": len(records)})
        self.s3.put_object(Bucket=BUCKET, Key=f"{prefix}manifest.json.out", Body=manifest)

    def lane(self) -> BatchDeps:
        lane = build_batch_deps()
        lane.backfill.has_model = True
        lane.batches = self.lane_batches
        return lane


def bedrock_round(lane: BatchDeps, local: Local) -> BatchRound:
    done = run_batch_round(lane.backfill.configs.for_request, lane)
    local.runner.drain()
    return done


def test_a_job_reads_the_live_requests_from_s3_and_its_output_is_applied(
    make_local: MakeLocal, monkeypatch: pytest.MonkeyPatch, aws: None
) -> None:
    # Given dana's turns kept as pending episodes through an outage
    local = make_local(backend="sqlite", config=BATCH_CONFIG)
    live = outage(local, monkeypatch)
    bedrock = FakeBedrock()
    lane = bedrock.lane()

    # When a round submits them
    bedrock.expect_create()
    first = bedrock_round(lane, local)

    # Then a job runs over one JSONL input: each record the live request as an InvokeModel body
    assert first.submitted_batches == [JOB]
    records = bedrock.input_records()
    expected_bodies = [
        {k: v for k, v in body.items() if k != "model"}
        | {"anthropic_version": "bedrock-2023-05-31"}
        for body in live.bodies
    ]
    assert [record["modelInput"] for record in records] == expected_bodies
    assert statuses(local) == [("in_batch", JOB), ("in_batch", JOB)]

    # When the job is still in progress (a round lists the jobs once), then has completed
    # with its output in S3
    bedrock.expect_list("InProgress")
    assert bedrock_round(lane, local).applied_batches == []
    bedrock.write_output(
        [
            {**record, "modelOutput": recorded(ANSWERS[index])}
            for index, record in enumerate(records)
        ]
    )
    bedrock.expect_list("Completed")
    bedrock.expect_get("Completed")  # where its output is
    done = bedrock_round(lane, local)

    # Then both episodes are extracted into the memories a live run stores
    assert (done.applied_batches, done.extracted, done.returned_to_pending) == ([JOB], 2, 0)
    assert statuses(local) == [("extracted", None), ("extracted", None)]
    assert [text for text, *_ in memory_state(local, "dana") if "Porto" in text] != []
    bedrock.stub.assert_no_pending_responses()


def test_an_expired_job_puts_its_episodes_back_to_pending(
    make_local: MakeLocal, monkeypatch: pytest.MonkeyPatch, aws: None
) -> None:
    # Given two episodes in a Bedrock job
    local = make_local(backend="sqlite", config=BATCH_CONFIG)
    outage(local, monkeypatch)
    bedrock = FakeBedrock()
    lane = bedrock.lane()
    bedrock.expect_create()
    bedrock_round(lane, local)

    # When the job expired before it ran, and the next round's submission is refused
    bedrock.expect_list("Expired")
    bedrock.stub.add_client_error(
        "create_model_invocation_job", "ServiceQuotaExceededException", http_status_code=400
    )
    with pytest.raises(LlmRequestRejected, match="ServiceQuotaExceededException"):
        bedrock_round(lane, local)

    # Then its episodes are pending again (no memory written), waiting for a later round
    assert statuses(local) == [("pending", None), ("pending", None)]
    assert local.memories("dana") == []
    assert lane.store.open_batches() == []


def test_an_errored_record_puts_only_its_episode_back_to_pending(
    make_local: MakeLocal, monkeypatch: pytest.MonkeyPatch, aws: None
) -> None:
    # Given two episodes in a Bedrock job whose first record errored
    local = make_local(backend="sqlite", config=BATCH_CONFIG)
    outage(local, monkeypatch)
    bedrock = FakeBedrock()
    lane = bedrock.lane()
    bedrock.expect_create()
    bedrock_round(lane, local)
    first, second = bedrock.input_records()
    bedrock.write_output(
        [
            {**first, "error": {"errorCode": 400, "errorMessage": "bad request"}},
            {**second, "modelOutput": recorded(ANSWERS[1])},
        ]
    )

    # When the completed job is read
    bedrock.expect_get("Completed", times=3)
    answers = bedrock.lane_batches.answers(JOB)
    assert [answer.error for answer in answers] == ["errored: 400", None]
    # Then the answer is priced at half the list price
    assert answers[1].call is not None
    usage = recorded(ANSWERS[1])["usage"]
    full = (usage["input_tokens"] * 1.0 + usage["output_tokens"] * 5.0) / 1e6
    assert answers[1].call.usage.cost_usd == pytest.approx(full / 2)

    # And when the job's results are applied
    done = BatchRound()
    apply_batch(JOB, lane.backfill.configs.for_request, lane, done)
    assert (done.extracted, done.returned_to_pending) == (1, 1)
    assert statuses(local)[0] == ("pending", None)


def test_fewer_records_than_bedrock_takes_wait_pending(
    make_local: MakeLocal, monkeypatch: pytest.MonkeyPatch, aws: None
) -> None:
    # Given two pending episodes and Bedrock's default minimum of 100 records per job
    local = make_local(backend="sqlite", config=BATCH_CONFIG)
    outage(local, monkeypatch)
    bedrock = FakeBedrock(min_records=100)
    lane = bedrock.lane()

    # When a round runs
    done = bedrock_round(lane, local)

    # Then no job is created and both wait, pending, for a later round
    assert (done.submitted_batches, done.waiting_episodes) == ([], 2)
    assert statuses(local) == [("pending", None), ("pending", None)]
    bedrock.stub.assert_no_pending_responses()


def test_a_round_lists_only_memwrites_jobs_newest_first_one_page_while_they_are_recent(
    aws: None,
) -> None:
    # Given memwrite's open job on the listing's first page
    bedrock = FakeBedrock()
    bedrock.expect_list("Completed")
    # When a round asks for its state / Then one listing answers it, no GetModelInvocationJob
    assert bedrock.lane_batches.states([JOB]) == {JOB: BatchState.ENDED}
    bedrock.stub.assert_no_pending_responses()


def test_a_job_the_listing_does_not_show_is_asked_for_alone_after_500_jobs(aws: None) -> None:
    # Given an account with many newer memwrite jobs than the open one (a first page the
    # size of the open jobs, five full pages and more to come)
    bedrock = FakeBedrock()
    for page in range(6):
        after = None if page == 0 else f"page-{page}"
        newer = f"{JOB}-newer-{page}"
        size = 11 if page == 0 else 100
        bedrock.expect_list(
            "InProgress",
            job=newer,
            jobs=size,
            after=after,
            next_token=f"page-{page + 1}",
            max_results=size,
        )
    bedrock.expect_get("Failed")
    # When a round asks for the open job's state
    states = bedrock.lane_batches.states([JOB])
    # Then about 500 jobs were read, not the account's whole history, and the job asked alone
    assert states == {JOB: BatchState.FAILED}
    bedrock.stub.assert_no_pending_responses()
