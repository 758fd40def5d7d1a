"""Prompt caching through the real `anthropic` client (httpx2 mock transport): the extraction
request's shared prefix is marked `cache_control` and the tenant's steering comes after it in
a block of its own, on the direct API and on Bedrock; the cache's writes and reads are recorded
and priced (1.25x and 0.1x of the input price); a prefix under the model's minimum cacheable
length is warned about once, at start-up."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx2
import pytest

from memwrite.adapters.anthropic import client as client_module
from memwrite.adapters.anthropic.batches import AnthropicMessageBatches
from memwrite.adapters.anthropic.extractor import AnthropicExtractorClient
from memwrite.adapters.aws.emf_metrics import EmfMetrics
from memwrite.config.settings import ExtractConfig
from memwrite.costs.pricing import cost_usd
from memwrite.costs.usage import LlmUsage
from memwrite.models import Role
from memwrite.prompts.extract import CACHED_PREFIX, BatchTurn, ExtractPromptInput, render
from memwrite.spans import usage_summary
from tests.emf import emf_metrics, metric_total
from tests.recorded_api import recorded

AT = datetime(2025, 3, 14, 10, 0, tzinfo=UTC)
STEERED = ExtractConfig(instructions="Remember the user's pets by name.")
# Haiku 4.5 list prices: USD per million input and output tokens.
HAIKU_IN, HAIKU_OUT = 1.00, 5.00


def batch_of(text: str) -> ExtractPromptInput:
    return ExtractPromptInput(
        turns=(BatchTurn(turn_id="t1", role=Role.USER, text=text, timestamp=AT),)
    )


def reply(**usage: int) -> dict[str, Any]:
    """The recorded valid extraction, with the usage the API would report for a cached call."""
    answer = recorded("extract_valid")
    return {**answer, "usage": {**answer["usage"], **usage}}


class Api:
    """Answers every request with `answer`; keeps each request's body."""

    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer
        self.requests: list[dict[str, Any]] = []
        self.urls: list[str] = []

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(json.loads(request.content))
        self.urls.append(str(request.url))
        return httpx2.Response(200, json=self.answer)

    def http(self) -> httpx2.Client:
        return httpx2.Client(transport=httpx2.MockTransport(self.handle))


def extractor(api: Api, config: ExtractConfig = STEERED) -> AnthropicExtractorClient:
    return AnthropicExtractorClient(
        config, api_key="test-key", base_url="http://testserver", http_client=api.http()
    )


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # The warning is logged once per process: each test starts as a cold start does.
    monkeypatch.setattr(client_module, "_warned", set())
    yield


def test_the_shared_prefix_is_cached_and_the_tenant_block_comes_after_it() -> None:
    # Given a tenant with instructions and one without
    api = Api(reply())
    for config in (STEERED, ExtractConfig()):
        # When each extracts a batch
        prompt = render(batch_of("My cat Miso is 3."), config)
        extractor(api, config).extract(prompt.system, prompt.messages, config.model)
    steered, plain = api.requests
    # Then both requests begin with the same block, the shared prefix, marked for the cache
    prefix_block = {"type": "text", "text": CACHED_PREFIX, "cache_control": {"type": "ephemeral"}}
    assert steered["system"][0] == plain["system"][0] == prefix_block
    # And after it come the pass's task, then the tenant's instructions in a block of their own,
    # neither marked: they never split the cache the tenants share
    task, tenant = steered["system"][1:]
    assert task["text"].startswith("This is a full pass.")
    assert "<tenant_instructions>\nRemember the user's pets by name.\n" in tenant["text"]
    assert "cache_control" not in task and "cache_control" not in tenant
    assert len(plain["system"]) == 2  # no tenant block without steering
    # And the conversation comes last, in the messages
    assert "My cat Miso is 3." in steered["messages"][0]["content"]
    assert "My cat Miso" not in json.dumps(steered["system"])


def test_the_detail_pass_shares_the_full_pass_prefix() -> None:
    # Given both passes of one batch
    from memwrite.prompts.extract import render_detail

    inp = batch_of("Let's take the Team plan.")
    full, detail = render(inp, STEERED), render_detail(inp, inp.turns, STEERED)
    # Then they share the cached prefix and differ only after it
    assert full.system.prefix == detail.system.prefix == CACHED_PREFIX
    assert "<detail_focus>" in detail.system.task and "<detail_focus>" not in full.system


def test_cache_writes_and_reads_are_recorded_and_priced() -> None:
    # Given answers that wrote the 4,713-token prefix, then read it
    prompt = render(batch_of("My cat Miso is 3."), STEERED)
    usages = []
    for usage in (
        {"input_tokens": 600, "cache_creation_input_tokens": 4_713, "cache_read_input_tokens": 0},
        {"input_tokens": 600, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 4_713},
    ):
        call = extractor(Api(reply(output_tokens=250, **usage))).extract(
            prompt.system, prompt.messages, STEERED.model
        )
        usages.append(call.usage)
    written, read = usages
    # Then each usage carries the cache's tokens apart from the uncached input
    assert (written.input_tokens, written.cache_creation_input_tokens) == (600, 4_713)
    assert (read.cache_read_input_tokens, read.cache_creation_input_tokens) == (4_713, 0)
    # And they are priced at 1.25x (write) and 0.1x (read) of the input price
    assert written.cost_usd == pytest.approx((600 + 4_713 * 1.25) / 1e6 + 250 * HAIKU_OUT / 1e6)
    assert read.cost_usd == pytest.approx((600 + 471.3) / 1e6 + 250 * HAIKU_OUT / 1e6)
    assert read.cost_usd == pytest.approx(0.0023213)  # the issue's ~$0.0023 a cached call
    # And the span's summary (what a trace sums) carries both, its cost including them
    summary = usage_summary(usages)
    assert summary is not None
    assert (summary.cache_creation_input_tokens, summary.cache_read_input_tokens) == (4_713, 4_713)
    assert summary.cost_usd == pytest.approx(written.cost_usd + read.cost_usd)


def test_cost_usd_prices_cache_writes_and_reads_from_the_input_price() -> None:
    prices = ExtractConfig().prices_per_mtok
    # A million tokens of each kind at Haiku 4.5's $1 input price
    assert cost_usd("claude-haiku-4-5", 1_000_000, 0, prices) == pytest.approx(1.00)
    written = cost_usd("claude-haiku-4-5", 0, 0, prices, cache_creation_input_tokens=1_000_000)
    read = cost_usd("claude-haiku-4-5", 0, 0, prices, cache_read_input_tokens=1_000_000)
    assert (written, read) == (pytest.approx(1.25), pytest.approx(0.10))


def test_bedrock_gets_the_same_cached_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given IAM credentials and a Bedrock model id
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK"):
        monkeypatch.delenv(name, raising=False)
    model = "eu.anthropic.claude-haiku-4-5-20251001-v1:0"
    config = STEERED.model_copy(update={"provider": "bedrock", "model": model})
    api = Api(reply(input_tokens=600, cache_read_input_tokens=4_713))
    client = AnthropicExtractorClient(config, aws_region="eu-west-1", http_client=api.http())
    # When a batch is extracted through AnthropicBedrock
    prompt = render(batch_of("My cat Miso is 3."), config)
    call = client.extract(prompt.system, prompt.messages, model)
    # Then Bedrock's invoke body carries the prefix marked for the cache, the tenant block after
    (body,) = api.requests
    assert api.urls == [f"https://bedrock-runtime.eu-west-1.amazonaws.com/model/{model}/invoke"]
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert body["system"][0]["text"] == CACHED_PREFIX
    assert "tenant_instructions" in body["system"][2]["text"]
    # And the read is recorded and priced
    assert call.usage.cache_read_input_tokens == 4_713


def test_a_batched_request_carries_the_cache_mark_and_its_cached_tokens_get_the_discount() -> None:
    # Given the batch lane at half price
    api = Api(reply(input_tokens=600, output_tokens=250, cache_read_input_tokens=4_713))
    lane = AnthropicMessageBatches(
        STEERED, price_factor=0.5, api_key="k", base_url="http://testserver", http_client=api.http()
    )
    prompt = render(batch_of("My cat Miso is 3."), STEERED)
    # When the request a batch holds is built, and an answer to it priced
    request = lane._client.request(prompt.system, prompt.messages)
    from anthropic.types import Message

    _, usage = lane._client.answer(
        Message.model_validate(api.answer), model=STEERED.model, price_factor=0.5
    )
    # Then the request caches the prefix as a live call does
    assert request["system"][0]["cache_control"] == {"type": "ephemeral"}  # type: ignore[index]
    # And the cached read costs half its live price
    live = (600 + 471.3) / 1e6 + 250 * HAIKU_OUT / 1e6
    assert usage.cost_usd == pytest.approx(live / 2)
    assert usage.cache_read_input_tokens == 4_713


def test_a_prefix_under_the_models_minimum_is_warned_about_once_at_start_up(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given a model whose minimum cacheable length the prefix does not reach
    too_long = ExtractConfig(min_cacheable_tokens={"claude-haiku-4-5": 50_000})
    with caplog.at_level(logging.WARNING, logger=client_module.__name__):
        # When the extractor is built twice (a warm container builds it again)
        extractor(Api(reply()), too_long)
        extractor(Api(reply()), too_long)
    # Then one warning says so, with the estimate and the minimum
    (record,) = [r for r in caplog.records if "cached prefix" in r.getMessage()]
    assert "under the 50000 claude-haiku-4-5 needs to cache it" in record.getMessage()


def test_the_default_prefix_reaches_haiku_4_5s_minimum_without_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given the default configuration (Claude Haiku 4.5: 4,096 tokens)
    with caplog.at_level(logging.WARNING, logger=client_module.__name__):
        extractor(Api(reply()), ExtractConfig())
    # Then nothing is warned: the prefix's low estimate (4 characters a token) is over 4,096
    assert not [r for r in caplog.records if "cached prefix" in r.getMessage()]
    assert client_module.prefix_tokens(CACHED_PREFIX) >= 4_096
    # And an unlisted model family is held to the largest documented minimum
    unknown = ExtractConfig(min_cacheable_tokens={})
    assert client_module.warn_if_uncacheable("extraction", "short", unknown) == 4_096


def test_cache_reads_and_writes_reach_the_dashboard(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the Lambdas' metrics sink, printing as in Lambda
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    # And two extraction calls, one writing and one reading the prefix
    calls = [
        LlmUsage("claude-haiku-4-5-20251001", 600, 250, 0.01, cache_creation_input_tokens=4_713),
        LlmUsage("claude-haiku-4-5-20251001", 600, 250, 0.002, cache_read_input_tokens=4_713),
    ]
    # When their usage is emitted
    EmfMetrics().llm_usage("extract", calls)
    metrics = emf_metrics(capsys.readouterr().out)
    # Then both counts are metrics by stage and model family (what the CacheReadsIdle alarm reads)
    dims = {"Stage": "extract", "Model": "claude-haiku-4-5"}
    assert metric_total(metrics, "llm.cache_read_input_tokens", **dims) == 4_713
    assert metric_total(metrics, "llm.cache_creation_input_tokens", **dims) == 4_713


def test_the_extraction_schema_goes_bare_its_descriptions_being_in_the_cached_prefix() -> None:
    # Given an extraction
    import anthropic

    from memwrite.prompts.extract import ExtractionResult

    api = Api(reply())
    prompt = render(batch_of("My cat Miso is 3."), STEERED)
    extractor(api).extract(prompt.system, prompt.messages, STEERED.model)
    schema = api.requests[0]["output_config"]["format"]["schema"]
    # Then the output schema has the structure of ExtractionResult's, without a description
    full = anthropic.transform_schema(ExtractionResult)
    assert "description" not in json.dumps(schema)
    assert schema["$defs"].keys() == full["$defs"].keys()
    candidate, described = schema["$defs"]["Candidate"], full["$defs"]["Candidate"]
    assert candidate["properties"].keys() == described["properties"].keys()
    assert candidate["required"] == described["required"]
    # And every description it dropped is in the cached prefix, which every call reads, with
    # the limits the grammar cannot hold ("{maxLength: 500, minLength: 1}") and the answer is
    # validated against
    for name, field in described["properties"].items():
        text, _, limits = field.get("description", "").partition("\n\n{")
        if text.startswith("{default:"):  # a default only: described by the prompt's notes
            continue
        assert f"- {name}: {text}" in CACHED_PREFIX
        if limits and "default" not in limits:
            assert f"{text} {{{limits}" in CACHED_PREFIX
