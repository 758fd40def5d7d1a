"""Any Bedrock model through the Converse API: each answer shape through the real boto3
`bedrock-runtime` client (botocore Stubber, which also checks every request and answer
against the service's model), and the config that picks the adapter and a model per task.

The answers in tests/recorded/bedrock_converse are shaped after the Converse API reference
(Claude, Nova and Llama on Bedrock); they were written for these tests, not captured from an
account.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from botocore.stub import ANY, Stubber
from pydantic import ValidationError

from memwrite.adapters.aws.bedrock_converse import (
    TOOL_NAME,
    ConverseDedupeJudge,
    ConverseExtractor,
    ConverseQuestions,
    ConverseResolveJudge,
    ConverseVerifier,
    converse_runtime_client,
)
from memwrite.adapters.sqlite.budget import SqliteBudgetStore
from memwrite.adapters.sqlite.database import open_database
from memwrite.budget import ModelBudget
from memwrite.config.environment import LambdaEnvironment
from memwrite.config.model_limits import ModelConfig
from memwrite.config.settings import ExtractConfig, PipelineConfig
from memwrite.costs.pricing import cost_usd
from memwrite.errors import (
    BudgetExhausted,
    LlmRefused,
    LlmRequestRejected,
    LlmUnavailable,
    TransientError,
    TruncatedLlmOutput,
)
from memwrite.extract.candidates import TRUNCATED_ERROR, extract_candidates
from memwrite.extract.llm import extract_with_llm
from memwrite.models import Role
from memwrite.payloads import Extractor
from memwrite.prompts import PromptMessage
from memwrite.prompts.extract import CACHED_PREFIX, BatchTurn, ExtractPromptInput
from memwrite.wiring.backends import Adapters

RECORDED = Path(__file__).parents[1] / "recorded" / "bedrock_converse"
HAIKU = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
SONNET = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
NOVA_LITE = "us.amazon.nova-lite-v1:0"
LLAMA = "us.meta.llama3-3-70b-instruct-v1:0"
LISBON = "I moved to Lisbon last month and I can't stand cilantro."
# A turn beyond the rules: only a model reads it.
BEYOND_RULES = "Honestly the whole Lisbon move has been great food and paperwork with the landlord."
AT = datetime(2025, 3, 14, 10, 0, tzinfo=UTC)
T0 = 1_800_000_000.0  # the budget's clock: standing still, nothing refills unseen


def recorded(name: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((RECORDED / f"{name}.json").read_text(encoding="utf-8"))
    return body


def config(model: str = HAIKU, **changes: Any) -> ExtractConfig:
    return ExtractConfig(
        provider="bedrock-converse", model=model, aws_region="us-east-1", **changes
    )


@pytest.fixture
def runtime() -> Iterator[tuple[Any, Stubber]]:
    """The real `bedrock-runtime` client, its answers stubbed; every answer must be used."""
    client = converse_runtime_client(config())
    with Stubber(client) as stub:
        yield client, stub
        stub.assert_no_pending_responses()


class Sent:
    """The Converse requests the client made, as the Stubber saw them."""

    def __init__(self, client: Any) -> None:
        self.requests: list[dict[str, Any]] = []
        client.meta.events.register_first(
            "before-parameter-build.bedrock-runtime.Converse", self._keep
        )

    def _keep(self, params: dict[str, Any], **_: Any) -> None:
        self.requests.append(params)


def answer(stub: Stubber, name: str) -> None:
    stub.add_response("converse", recorded(name), {"modelId": ANY, **_ANY_REQUEST})


_ANY_REQUEST = dict.fromkeys(("system", "messages", "inferenceConfig", "toolConfig"), ANY)


def one_turn(text: str = LISBON) -> ExtractPromptInput:
    return ExtractPromptInput(
        turns=(BatchTurn(turn_id="turn-1", role=Role.USER, text=text, timestamp=AT),)
    )


def usage_of(name: str) -> tuple[int, int]:
    usage = recorded(name)["usage"]
    return usage["inputTokens"], usage["outputTokens"]


def test_a_claude_tool_call_is_the_answer_and_its_usage_is_priced(
    runtime: tuple[Any, Stubber],
) -> None:
    # Given Claude on Bedrock answers with a call of the answer tool
    client, stub = runtime
    sent = Sent(client)
    answer(stub, "claude_extract_tool_use")
    # When a one-turn batch is extracted
    out = extract_with_llm(
        one_turn(), config(), ConverseExtractor(config(), client=client), on_json_fail=lambda: None
    )
    # Then both candidates come back, tied to the turn, at Haiku 4.5's list price
    assert [(c.attribute, c.value) for c in out.candidates] == [
        ("lives_in", "Lisbon"),
        ("dislikes", "cilantro"),
    ]
    assert {c.source_turn_id for c in out.candidates} == {"turn-1"}
    (call,) = out.calls
    assert (call.input_tokens, call.output_tokens) == usage_of("claude_extract_tool_use")
    assert call.model == HAIKU
    assert call.cost_usd == pytest.approx(2011 * 1.00 / 1e6 + 431 * 5.00 / 1e6)
    # And Claude was told to call the tool, whose schema has no references left to follow
    (request,) = sent.requests
    assert request["modelId"] == HAIKU
    assert request["toolConfig"]["toolChoice"] == {"tool": {"name": TOOL_NAME}}
    assert request["inferenceConfig"] == {"maxTokens": config().max_output_tokens}
    schema = request["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"]
    assert "$ref" not in json.dumps(schema)
    assert schema["properties"]["candidates"]["items"]["properties"]["quality"]["type"] == "object"
    assert request["messages"][0]["role"] == "user"
    assert LISBON in request["messages"][0]["content"][0]["text"]


def test_a_cut_off_answer_is_asked_again_with_twice_the_room_then_fails_as_max_tokens(
    runtime: tuple[Any, Stubber],
) -> None:
    # Given two answers that both stop at max_tokens
    client, stub = runtime
    sent = Sent(client)
    answer(stub, "claude_extract_truncated")
    answer(stub, "claude_extract_truncated")
    llm = ConverseExtractor(config(), client=client)
    # When the batch is extracted with episodes kept
    found = extract_candidates(
        one_turn(BEYOND_RULES).turns,
        (),
        config(),
        llm,
        on_json_fail=lambda: None,
        defer_on_model_failure=True,
    )
    # Then the second request had twice the room, and the turn is kept whole as an episode
    # whose reason is the truncation (DeferredModelFailed(error="max_tokens"))
    assert [r["inferenceConfig"]["maxTokens"] for r in sent.requests] == [2_048, 4_096]
    assert found.model_error == TRUNCATED_ERROR == "max_tokens"
    (turn,) = found.turns
    assert turn.extractor is Extractor.DEFERRED
    assert turn.candidates == ()


def test_a_cut_off_answer_that_fits_the_second_time_is_used_and_both_calls_are_paid(
    runtime: tuple[Any, Stubber],
) -> None:
    client, stub = runtime
    answer(stub, "claude_extract_truncated")
    answer(stub, "claude_extract_tool_use")
    call = ConverseExtractor(config(), client=client).extract(
        "system", [{"role": "user", "content": LISBON}], HAIKU
    )
    assert len(call.result.candidates) == 2
    first, second = usage_of("claude_extract_truncated"), usage_of("claude_extract_tool_use")
    assert call.usage.input_tokens == first[0] + second[0]
    assert call.usage.output_tokens == first[1] + second[1]


def test_twice_truncated_raises_with_both_usages(runtime: tuple[Any, Stubber]) -> None:
    client, stub = runtime
    answer(stub, "claude_extract_truncated")
    answer(stub, "claude_extract_truncated")
    with pytest.raises(TruncatedLlmOutput) as raised:
        ConverseExtractor(config(), client=client).extract(
            "system", [{"role": "user", "content": LISBON}], HAIKU
        )
    assert raised.value.usage.output_tokens == 2 * 2_048
    assert raised.value.usage.malformed


def test_a_malformed_tool_input_is_asked_again_then_used(runtime: tuple[Any, Stubber]) -> None:
    # Given the judge's first tool call lacks its verdict and the second has it
    client, stub = runtime
    answer(stub, "claude_dedupe_malformed_tool_input")
    answer(stub, "claude_dedupe_same")
    # When a pair is judged
    judgement = ConverseDedupeJudge(config(), client=client).same_memory(
        "The user lives in Berlin, Germany.", "The user lives in Berlin."
    )
    # Then the second answer decides, and both calls are paid for, the first as malformed
    assert judgement.same is True
    assert judgement.malformed == 1
    assert [call.malformed for call in judgement.calls] == [True, False]


def test_a_tool_input_malformed_twice_keeps_the_pair_distinct(
    runtime: tuple[Any, Stubber],
) -> None:
    client, stub = runtime
    answer(stub, "claude_dedupe_malformed_tool_input")
    answer(stub, "claude_dedupe_malformed_tool_input")
    judgement = ConverseDedupeJudge(config(), client=client).same_memory("a", "b")
    assert judgement.same is False
    assert judgement.malformed == 2


@pytest.mark.parametrize(
    ("name", "model"),
    [("nova_extract_content_filtered", NOVA_LITE), ("claude_extract_guardrail_intervened", HAIKU)],
)
def test_a_filtered_answer_is_a_refusal_kept_as_an_episode_never_a_memory(
    runtime: tuple[Any, Stubber], name: str, model: str
) -> None:
    # Given the content filter (or a guardrail) stops the answer
    client, stub = runtime
    sent = Sent(client)
    answer(stub, name)
    llm = ConverseExtractor(config(model), client=client)
    # When the batch is extracted with episodes kept
    found = extract_candidates(
        one_turn(BEYOND_RULES).turns,
        (),
        config(model),
        llm,
        on_json_fail=lambda: None,
        defer_on_model_failure=True,
    )
    # Then it was asked once (asking again cannot help), and the turn is kept whole as an
    # episode for the refusal: its message is never read as an answer
    assert len(sent.requests) == 1
    assert found.model_error == "LlmRefused"
    (turn,) = found.turns
    assert turn.extractor is Extractor.DEFERRED
    assert turn.candidates == ()


def test_a_refusal_without_episodes_fails_visibly_with_its_usage(
    runtime: tuple[Any, Stubber],
) -> None:
    client, stub = runtime
    answer(stub, "nova_extract_content_filtered")
    with pytest.raises(LlmRefused, match="content_filtered") as raised:
        extract_with_llm(
            one_turn(),
            config(NOVA_LITE),
            ConverseExtractor(config(NOVA_LITE), client=client),
            on_json_fail=lambda: None,
        )
    assert raised.value.usage.input_tokens == usage_of("nova_extract_content_filtered")[0]


def test_throttling_left_after_botocore_retries_is_transient_and_lowers_the_budget(
    runtime: tuple[Any, Stubber], tmp_path: Path
) -> None:
    # Given a budget, and Bedrock still throttling once botocore's own retries are spent
    client, stub = runtime
    budget = ModelBudget(ModelConfig(), SqliteBudgetStore(open_database(tmp_path)), now=lambda: T0)
    stub.add_client_error(
        "converse", service_error_code="ThrottlingException", http_status_code=429
    )
    llm = ConverseExtractor(config(), client=client, budget=budget)
    messages: list[PromptMessage] = [{"role": "user", "content": LISBON}]
    # When a call is made
    with pytest.raises(LlmUnavailable) as raised:
        llm.extract("system", messages, HAIKU)
    # Then it is a TransientError (the queue tries again later) ...
    assert isinstance(raised.value, TransientError)
    # ... and the model's budget admits nothing for a while: no request is sent
    with pytest.raises(BudgetExhausted):
        llm.extract("system", messages, HAIKU)


def test_botocore_retries_throttling_itself_as_configured() -> None:
    # max_retries 1 (the default): two attempts in botocore's standard mode, with backoff
    client = converse_runtime_client(config())
    assert client.meta.config.retries == {"total_max_attempts": 2, "mode": "standard"}
    assert client.meta.config.read_timeout == config().timeout_secs


@pytest.mark.parametrize(
    ("code", "status", "error"),
    [
        ("ValidationException", 400, LlmRequestRejected),
        ("AccessDeniedException", 403, LlmRequestRejected),
        ("ModelTimeoutException", 408, LlmUnavailable),
        ("ServiceUnavailableException", 503, LlmUnavailable),
    ],
)
def test_bedrock_errors_are_translated(
    runtime: tuple[Any, Stubber], code: str, status: int, error: type[Exception]
) -> None:
    client, stub = runtime
    stub.add_client_error("converse", service_error_code=code, http_status_code=status)
    with pytest.raises(error, match=code):
        ConverseExtractor(config(), client=client).extract(
            "s", [{"role": "user", "content": "x"}], HAIKU
        )


def test_a_nova_answer_thinks_aloud_then_calls_the_tool(runtime: tuple[Any, Stubber]) -> None:
    # Given Nova Lite answers with its thinking in text, then the tool call
    client, stub = runtime
    sent = Sent(client)
    answer(stub, "nova_extract_tool_use")
    out = extract_with_llm(
        one_turn(),
        config(NOVA_LITE),
        ConverseExtractor(config(NOVA_LITE), client=client),
        on_json_fail=lambda: None,
    )
    # Then the tool's input is the answer (the thinking is not), at Nova Lite's price
    assert [c.value for c in out.candidates] == ["Lisbon", "cilantro"]
    (call,) = out.calls
    assert call.cost_usd == pytest.approx(cost_usd(NOVA_LITE, 1877, 512, config().prices_per_mtok))
    assert call.cost_usd < 0.001
    # And Nova, like Claude, was told to call the tool
    assert sent.requests[0]["toolConfig"]["toolChoice"] == {"tool": {"name": TOOL_NAME}}


@pytest.mark.parametrize("name", ["llama_extract_tool_use", "llama_extract_text_json"])
def test_a_llama_answer_is_read_from_its_tool_call_or_its_text(
    runtime: tuple[Any, Stubber], name: str
) -> None:
    # Given Llama (which takes no forced tool choice) answers by the tool, or in text
    client, stub = runtime
    sent = Sent(client)
    answer(stub, name)
    out = extract_with_llm(
        one_turn(),
        config(LLAMA),
        ConverseExtractor(config(LLAMA), client=client),
        on_json_fail=lambda: None,
    )
    # Then the answer is read either way
    assert [c.value for c in out.candidates] == ["Lisbon", "cilantro"]
    # And Llama got `auto` with the instruction in its system prompt
    (request,) = sent.requests
    assert "toolChoice" not in request["toolConfig"]
    assert request["system"][0]["text"].endswith(f"calling the tool {TOOL_NAME}.")


# The wiring: the config picks the adapter, and a model per task reaches its requests.


def converse_settings(tmp_path: Path, **pipeline: Any) -> dict[str, str]:
    path = tmp_path / "memwrite.json"
    body = {
        "pipeline": {"extract": {"provider": "bedrock-converse", "model": NOVA_LITE}, **pipeline}
    }
    path.write_text(json.dumps(body), encoding="utf-8")
    return {
        "MEMWRITE_BACKEND": "sqlite",
        "MEMWRITE_DATA_DIR": str(tmp_path / "data"),
        "MEMWRITE_CONFIG": str(path),
    }


def test_the_provider_bedrock_converse_wires_every_model_port_over_converse(
    tmp_path: Path,
) -> None:
    env = converse_settings(
        tmp_path,
        extract={"provider": "bedrock-converse", "model": NOVA_LITE, "verifier": {"enabled": True}},
    )
    adapters = Adapters.of(LambdaEnvironment.load(env))
    assert isinstance(adapters.extraction_llm(), ConverseExtractor)
    assert isinstance(adapters.verifier(), ConverseVerifier)
    assert isinstance(adapters.dedupe_judge(), ConverseDedupeJudge)
    assert isinstance(adapters.resolve_judge(), ConverseResolveJudge)
    assert isinstance(adapters.questions(), ConverseQuestions)


def test_a_model_per_task_reaches_that_tasks_requests(tmp_path: Path) -> None:
    # Given Nova Lite extracts and Claude Sonnet judges duplicates
    env = converse_settings(tmp_path, model={"tasks": {"dedupe_judge": SONNET}})
    adapters = Adapters.of(LambdaEnvironment.load(env))
    judge = adapters.dedupe_judge()
    llm = adapters.extraction_llm()
    assert judge is not None and llm is not None
    client = adapters._converse_options()["client"]  # the one client every adapter shares
    sent = Sent(client)
    with Stubber(client) as stub:
        answer(stub, "claude_dedupe_same")
        answer(stub, "nova_extract_tool_use")
        # When a pair is judged and a batch extracted
        judgement = judge.same_memory(
            "The user lives in Berlin, Germany.", "The user lives in Berlin."
        )
        pipeline = adapters.settings.pipeline
        extract_with_llm(one_turn(), pipeline.extract, llm, on_json_fail=lambda: None)
    # Then each request names its task's model, and each call is priced at its own
    assert [r["modelId"] for r in sent.requests] == [SONNET, NOVA_LITE]
    (call,) = judgement.calls
    assert call.model == SONNET
    assert call.cost_usd == pytest.approx(905 * 3.00 / 1e6 + 38 * 15.00 / 1e6)
    # And a task without a model of its own calls the extraction model
    assert pipeline.task_model("verify") == NOVA_LITE
    assert pipeline.task_model("resolve_judge") == NOVA_LITE


def test_the_extract_task_names_the_extraction_model() -> None:
    pipeline = PipelineConfig.model_validate(
        {"model": {"tasks": {"extract": NOVA_LITE, "verify": HAIKU}}}
    )
    assert pipeline.extract.model == NOVA_LITE
    assert pipeline.task_model("extract") == NOVA_LITE
    assert pipeline.task_model("verify") == HAIKU
    assert pipeline.model.tasks == {"verify": HAIKU}


def test_a_task_model_without_a_price_fails_when_the_config_loads() -> None:
    with pytest.raises(ValidationError, match=r"model.tasks.dedupe_judge: no price"):
        PipelineConfig.model_validate({"model": {"tasks": {"dedupe_judge": "mistral.large"}}})


def test_the_batch_lane_is_refused_over_converse() -> None:
    with pytest.raises(ValidationError, match="bedrock-converse"):
        PipelineConfig.model_validate(
            {"extract": {"provider": "bedrock-converse"}, "backfill": {"mode": "batch"}}
        )


def test_the_default_stays_claude_haiku_on_the_anthropic_api() -> None:
    pipeline = PipelineConfig()
    assert (pipeline.extract.provider, pipeline.extract.model) == ("anthropic", "claude-haiku-4-5")
    assert pipeline.model.tasks == {}


def test_cache_reads_are_reported_and_priced_at_a_tenth_of_the_input(
    runtime: tuple[Any, Stubber],
) -> None:
    # Given an answer whose prompt prefix was read from Bedrock's prompt cache
    client, stub = runtime
    answer(stub, "claude_dedupe_cached")
    judgement = ConverseDedupeJudge(config(), client=client).same_memory("a", "b")
    # Then the usage says so, and the read tokens cost 0.1 times the input price
    (call,) = judgement.calls
    assert (call.input_tokens, call.cache_read_input_tokens) == (120, 4_096)
    assert call.cache_creation_input_tokens == 0
    assert call.cost_usd == pytest.approx((120 + 0.1 * 4_096) * 1.00 / 1e6 + 35 * 5.00 / 1e6)


@pytest.mark.parametrize(("model", "cached"), [(HAIKU, True), (NOVA_LITE, True), (LLAMA, False)])
def test_the_shared_prefix_is_marked_for_bedrocks_cache_where_the_model_caches(
    runtime: tuple[Any, Stubber], model: str, cached: bool
) -> None:
    # Given a model with (Claude, Nova) or without (Llama) prompt caching on Bedrock
    client, stub = runtime
    sent = Sent(client)
    answer(stub, "claude_extract_tool_use")
    extract_with_llm(
        one_turn(),
        config(model),
        ConverseExtractor(config(model), client=client),
        on_json_fail=lambda: None,
    )
    # Then the extraction prompt's shared prefix is followed by a cache point, or not at all
    system = sent.requests[0]["system"]
    points = [i for i, block in enumerate(system) if "cachePoint" in block]
    assert points == ([1] if cached else [])
    if cached:
        assert system[0]["text"] == CACHED_PREFIX
