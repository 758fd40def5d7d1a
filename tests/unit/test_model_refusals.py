"""A refusal through the Anthropic Messages API (`stop_reason: refusal`), served to the real
`anthropic` client over a mock transport: never read as an answer, never asked again, the
turns kept as episodes. (Converse's content filter and guardrail: test_bedrock_converse.py.)"""

from __future__ import annotations

from datetime import UTC, datetime

import httpx2
import pytest

from memwrite.adapters.anthropic.extractor import AnthropicExtractorClient
from memwrite.config.settings import ExtractConfig
from memwrite.errors import LlmRefused
from memwrite.extract.candidates import extract_candidates
from memwrite.models import Role
from memwrite.payloads import Extractor
from memwrite.prompts.extract import BatchTurn
from tests.recorded_api import RecordedApi, haiku_cost

CONFIG = ExtractConfig()
# A turn beyond the rules: only a model reads it.
TURN = BatchTurn(
    turn_id="turn-1",
    role=Role.USER,
    text="Honestly the whole Lisbon move has been great food and paperwork with the landlord.",
    timestamp=datetime(2025, 3, 14, 10, 0, tzinfo=UTC),
)


def client_for(api: RecordedApi) -> AnthropicExtractorClient:
    return AnthropicExtractorClient(
        CONFIG,
        api_key="test-key",
        base_url="http://testserver",
        http_client=httpx2.Client(transport=httpx2.MockTransport(api.handle)),
        max_retries=0,
    )


def test_a_refusal_keeps_the_turn_as_an_episode_after_one_call() -> None:
    # Given the model refuses
    api = RecordedApi("extract_refusal")
    # When the batch is extracted with episodes kept
    found = extract_candidates(
        [TURN], (), CONFIG, client_for(api), on_json_fail=lambda: None, defer_on_model_failure=True
    )
    # Then it was asked once, and the turn waits whole as an episode for the refusal
    assert len(api.requests) == 1
    assert found.model_error == "LlmRefused"
    (turn,) = found.turns
    assert (turn.extractor, turn.candidates) == (Extractor.DEFERRED, ())


def test_a_refusal_carries_what_it_cost() -> None:
    api = RecordedApi("extract_refusal")
    with pytest.raises(LlmRefused, match="stop_reason=refusal") as raised:
        client_for(api).extract(
            "system", [{"role": "user", "content": TURN.text}], "claude-haiku-4-5"
        )
    assert raised.value.usage.malformed
    assert raised.value.usage.cost_usd == pytest.approx(haiku_cost("extract_refusal"))
