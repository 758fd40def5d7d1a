"""The agent tool sets on a live `memwrite serve`, each run by its framework's own agent loop
with a scripted model of the kind the framework takes (no key, no network but memwrite): the
model calls `remember`, then `recall`, and gets the memory back in the tool's result; then
`forget`, and recall no longer finds it."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from agents import Agent as OpenAIAgent
from agents import ModelResponse, RunConfig, Runner, Usage
from agents.models.interface import Model as OpenAIModel
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from strands import Agent as StrandsAgent
from strands.models.model import Model as StrandsModel

from memwrite.integrations import openai_agents, strands
from tests.client.conftest import API_KEY
from tests.serve_process import ServeProcess

OSLO = "The user lives in Oslo."
MEMORY_ID = re.compile(r"\[([0-9a-f]{32})\]")


def script(memory_id: list[str]) -> list[dict[str, Any]]:
    """remember, recall, forget (the id read from recall's answer), recall again, then text."""
    return [
        {"tool": "remember", "input": {"statement": "I live in Oslo."}},
        {"tool": "recall", "input": {"query": "where does the user live?"}},
        {"tool": "forget", "input": lambda: {"memory_id": memory_id[0]}},
        {"tool": "recall", "input": {"query": "where does the user live?"}},
        {"text": "Done."},
    ]


def tool_results(texts: list[str], memory_id: list[str]) -> None:
    """Keep the id recall gave, as a model would read it."""
    for text in texts:
        found = MEMORY_ID.search(text)
        if found and not memory_id:
            memory_id.append(found.group(1))


class ScriptedStrandsModel(StrandsModel):
    """A Strands model (the SDK's `Model` interface) that answers from a script."""

    def __init__(self) -> None:
        self.memory_id: list[str] = []
        self.steps = script(self.memory_id)
        self.results: list[str] = []

    def update_config(self, **model_config: Any) -> None:
        return None

    def get_config(self) -> dict[str, Any]:
        return {}

    async def structured_output(  # type: ignore[override]
        self, output_model: Any, prompt: Any, system_prompt: str | None = None, **kwargs: Any
    ) -> AsyncGenerator[dict[str, Any], None]:
        raise NotImplementedError
        yield {}

    async def stream(  # type: ignore[override]
        self, messages: list[dict[str, Any]], *args: Any, **kwargs: Any
    ) -> AsyncIterator[dict[str, Any]]:
        last = messages[-1]["content"] if messages else []
        texts = [
            part["text"]
            for block in last
            if "toolResult" in block
            for part in block["toolResult"]["content"]
            if "text" in part
        ]
        self.results.extend(texts)
        tool_results(texts, self.memory_id)
        step = self.steps.pop(0)
        yield {"messageStart": {"role": "assistant"}}
        if "tool" in step:
            arguments = step["input"]() if callable(step["input"]) else step["input"]
            use = {"toolUseId": uuid.uuid4().hex[:8], "name": step["tool"]}
            yield {"contentBlockStart": {"start": {"toolUse": use}}}
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(arguments)}}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "tool_use"}}
        else:
            yield {"contentBlockDelta": {"delta": {"text": step["text"]}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}


class ScriptedOpenAIModel(OpenAIModel):
    """An OpenAI Agents model (the SDK's `Model` interface) that answers from a script."""

    def __init__(self) -> None:
        self.memory_id: list[str] = []
        self.steps = script(self.memory_id)
        self.results: list[str] = []

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:  # type: ignore[override]
        items = input if isinstance(input, list) else []
        outputs = [i for i in items if i.get("type") == "function_call_output"]
        texts = [str(o["output"]) for o in outputs[len(self.results) :]]
        self.results.extend(texts)
        tool_results(texts, self.memory_id)
        step = self.steps.pop(0)
        if "tool" in step:
            arguments = step["input"]() if callable(step["input"]) else step["input"]
            call = ResponseFunctionToolCall(
                type="function_call",
                call_id=uuid.uuid4().hex[:8],
                name=step["tool"],
                arguments=json.dumps(arguments),
            )
            return ModelResponse(output=[call], usage=Usage(), response_id=None)
        text = ResponseOutputText(type="output_text", text=step["text"], annotations=[])
        message = ResponseOutputMessage(
            id="m", type="message", role="assistant", status="completed", content=[text]
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:  # type: ignore[override]
        raise NotImplementedError


def assert_remembered_recalled_forgotten(results: list[str]) -> None:
    remembered, recalled, forgotten, after = results
    assert remembered == "stored 1 new memory"
    assert OSLO in recalled
    assert forgotten.startswith("forgot ")
    assert OSLO not in after


def test_a_strands_agent_remembers_and_recalls(serve: ServeProcess) -> None:
    # Given a Strands agent with memwrite's tools for a user and a scripted model
    model = ScriptedStrandsModel()
    tools = strands.memwrite_tools(serve.base_url, API_KEY, user_id=f"dana-{uuid.uuid4().hex[:8]}")
    agent = StrandsAgent(model=model, tools=tools, callback_handler=None)
    # When the agent runs
    result = agent("I live in Oslo. Where do I live?")
    # Then the model got the memory back from recall, and forget removed it
    assert str(result).strip() == "Done."
    assert_remembered_recalled_forgotten(model.results)


def test_an_openai_agents_agent_remembers_and_recalls(serve: ServeProcess) -> None:
    # Given an OpenAI Agents agent with memwrite's tools for a user and a scripted model
    model = ScriptedOpenAIModel()
    tools = openai_agents.memwrite_tools(
        serve.base_url, API_KEY, user_id=f"dana-{uuid.uuid4().hex[:8]}"
    )
    agent = OpenAIAgent(name="assistant", model=model, tools=list(tools))
    # When the agent runs through the SDK's runner
    run = asyncio.run(
        Runner.run(
            agent, "I live in Oslo. Where do I live?", run_config=RunConfig(tracing_disabled=True)
        )
    )
    # Then the model got the memory back from recall, and forget removed it
    assert run.final_output == "Done."
    assert_remembered_recalled_forgotten(model.results)
