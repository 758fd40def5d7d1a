"""HyPE's parts: questions from a model (recorded replies through the real SDK) or from
templates, Titan v2 embeddings (botocore Stubber), and what question vectors do to recall."""

from __future__ import annotations

import io
import json
from pathlib import Path

import httpx2
import numpy as np
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber
from pydantic import ValidationError

from memwrite.adapters.anthropic.questions import AnthropicQuestions
from memwrite.adapters.aws.bedrock_embedder import TITAN_V2, BedrockEmbedder, bedrock_runtime_client
from memwrite.adapters.template_questions import TemplateQuestions
from memwrite.claims.candidate import MemoryType
from memwrite.config.environment import LambdaEnvironment
from memwrite.config.settings import ExtractConfig, PipelineConfig
from memwrite.errors import EmbedderUnavailable
from memwrite.wiring.search import build_embedder
from tests.paraphrase_set import memory_unit, recall_at
from tests.recorded_api import RecordedApi

LISBON = memory_unit(MemoryType.FACT, "user", "lives_in", "Lisbon", "The user lives in Lisbon.")


def questions_for(api: RecordedApi) -> AnthropicQuestions:
    return AnthropicQuestions(
        ExtractConfig(),
        api_key="test-key",
        base_url="http://testserver",
        http_client=httpx2.Client(transport=httpx2.MockTransport(api.handle)),
        max_retries=0,
    )


def test_the_model_writes_three_questions_that_leave_the_value_out() -> None:
    api = RecordedApi("hype_questions")
    generated = questions_for(api).questions_for(LISBON, 3)

    assert generated.questions == [
        "Where does the user live?",
        "Which city is the user based in?",
        "Where is the user's home?",
    ]
    # The request carries the memory and asks for exactly three, with the output schema
    request = api.requests[0]
    assert "The user lives in Lisbon." in request["messages"][0]["content"]
    assert "Write 3 questions." in request["messages"][0]["content"]
    assert request["output_config"]["format"]["type"] == "json_schema"


def test_a_malformed_answer_falls_back_to_the_templates_instead_of_blocking_the_row() -> None:
    generated = questions_for(RecordedApi("dedupe_malformed")).questions_for(LISBON, 3)
    assert generated.questions == TemplateQuestions().questions_for(LISBON, 3).questions
    assert len(generated.calls) == 1  # the malformed answer was still paid for


def test_template_questions_are_deterministic_and_never_contain_the_value() -> None:
    templates = TemplateQuestions()
    for memory_type, entity, attribute, value, text in [
        (MemoryType.FACT, "user", "lives_in", "Lisbon", "The user lives in Lisbon."),
        (MemoryType.FACT, "Ana", "lives_in", "Porto", "Ana lives in Porto."),
        (MemoryType.EVENT, "user", "ran", "a marathon", "The user ran a marathon."),
        (MemoryType.TASK, "user", "todo", "call mom", "The user must call mom."),
    ]:
        memory = memory_unit(memory_type, entity, attribute, value, text)
        first = templates.questions_for(memory, 3)
        assert first == templates.questions_for(memory, 3)
        assert len(first.questions) == 3 and first.calls == ()
        assert all(value.casefold() not in q.casefold() for q in first.questions)
    ana = memory_unit(MemoryType.FACT, "Ana", "lives_in", "Porto", "Ana lives in Porto.")
    assert templates.questions_for(ana, 1).questions == ["Where does Ana live?"]


def test_question_vectors_raise_recall_on_paraphrased_queries() -> None:
    # Given queries that share no content word with the memory they look for
    without = recall_at(5, with_questions=False)
    with_questions = recall_at(5, with_questions=True)
    # Then HyPE questions find more of them (the numbers are in the README, from make bench)
    assert with_questions > without


def stubbed(dimension: int = 4) -> tuple[BedrockEmbedder, Stubber]:
    client = bedrock_runtime_client("us-east-1")
    return BedrockEmbedder(client, dimension=dimension), Stubber(client)


def titan_reply(vector: list[float]) -> dict[str, object]:
    body = json.dumps({"embedding": vector, "inputTextTokenCount": 5}).encode()
    return {
        "body": StreamingBody(io.BytesIO(body), len(body)),
        "contentType": "application/json",
    }


def test_titan_v2_is_asked_per_text_with_the_configured_dimension_and_normalisation() -> None:
    embedder, stub = stubbed()
    for text, vector in [("The user lives in Lisbon.", [3.0, 4.0, 0, 0]), ("Where?", [0, 0, 1, 0])]:
        request = {"inputText": text, "dimensions": 4, "normalize": True}
        stub.add_response(
            "invoke_model",
            titan_reply(vector),
            {
                "modelId": TITAN_V2,
                "body": json.dumps(request),
                "contentType": "application/json",
                "accept": "application/json",
            },
        )
    with stub:
        rows = embedder.embed(["The user lives in Lisbon.", "Where?", "  "])
    stub.assert_no_pending_responses()
    assert rows.dtype == np.float32 and rows.shape == (3, 4)
    np.testing.assert_allclose(rows[0], [0.6, 0.8, 0, 0])  # unit length, as the port promises
    np.testing.assert_allclose(rows[2], [0, 0, 0, 0])  # no words: zero, and no call


def test_bedrock_throttling_after_retries_is_transient() -> None:
    embedder, stub = stubbed()
    stub.add_client_error("invoke_model", service_error_code="ThrottlingException")
    with stub, pytest.raises(EmbedderUnavailable, match="ThrottlingException"):
        embedder.embed(["The user lives in Lisbon."])


@pytest.mark.parametrize("dimension", [256, 512, 1024])
def test_the_titan_request_asks_for_the_configured_dimension(
    tmp_path: Path, dimension: int
) -> None:
    # Given settings that ask Titan v2 for `dimension`, and the embedder the wiring builds
    settings = tmp_path / "settings.json"
    search = {"embedder": "bedrock", "embedding_dimension": dimension}
    settings.write_text(json.dumps({"pipeline": {"search": search}}), encoding="utf-8")
    env = LambdaEnvironment.load(
        {
            "MEMWRITE_BACKEND": "sqlite",
            "MEMWRITE_DATA_DIR": str(tmp_path),
            "AWS_REGION": "eu-west-1",
        }
        | {"MEMWRITE_CONFIG": str(settings)}
    )
    embedder = build_embedder(env)
    assert isinstance(embedder, BedrockEmbedder)
    stub = Stubber(embedder._client)
    body = {"inputText": "The user lives in Lisbon.", "dimensions": dimension, "normalize": True}
    stub.add_response(
        "invoke_model",
        titan_reply([1.0] + [0.0] * (dimension - 1)),
        {
            "modelId": TITAN_V2,
            "body": json.dumps(body),
            "contentType": "application/json",
            "accept": "application/json",
        },
    )
    # When a memory is embedded
    with stub:
        rows = embedder.embed(["The user lives in Lisbon."])
    # Then the request carried the dimension, and the vector has it
    stub.assert_no_pending_responses()
    assert rows.shape == (1, dimension)


@pytest.mark.parametrize("dimension", [64, 128, 300, 2048])
def test_titan_takes_only_256_512_or_1024_dimensions(dimension: int) -> None:
    with pytest.raises(ValidationError, match="embedding_dimension") as refused:
        PipelineConfig.model_validate(
            {"search": {"embedder": "bedrock", "embedding_dimension": dimension}}
        )
    assert "search" in str(refused.value)  # where in the settings file
    assert PipelineConfig().search.hype_questions == 3
