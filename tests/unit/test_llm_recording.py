"""`MEMWRITE_LLM_RECORD`'s recorder at the anthropic client's HTTP boundary, and its replay.

The real client runs over a mock transport (`tests/recorded_api.py`); the recorder is a response
hook on that client, as it is on the SDK's default client in a real run.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import httpx2
import pytest

from memwrite.adapters.anthropic.dedupe_judge import AnthropicDedupeJudge
from memwrite.adapters.anthropic.extractor import AnthropicExtractorClient
from memwrite.adapters.anthropic.recording import ExchangeRecorder, request_key
from memwrite.config.environment import LambdaEnvironment
from memwrite.config.settings import ExtractConfig
from memwrite.wiring import Adapters
from tests.recorded_api import RecordedApi, RecordedExchanges, recorded

API_KEY = "sk-ant-test-never-written"


def judge_for(handle: Any, record_dir: Path) -> AnthropicDedupeJudge:
    return AnthropicDedupeJudge(
        ExtractConfig(),
        api_key=API_KEY,
        base_url="http://testserver",
        http_client=httpx2.Client(transport=httpx2.MockTransport(handle)),
        max_retries=0,
        record_dir=record_dir,
    )


def files_in(directory: Path) -> list[Path]:
    return sorted(directory.iterdir())


def test_every_answer_is_written_with_its_request_and_usage_but_no_header(
    tmp_path: Path,
) -> None:
    # Given a judge whose client records into a directory
    api = RecordedApi("dedupe_same")
    judge = judge_for(api.handle, tmp_path)
    # When it makes one call
    judge.same_memory("The user lives in Berlin, Germany.", "The user lives in Berlin.")
    # Then one file holds the request body and the answer, usage included, named by the body
    (path,) = files_in(tmp_path)
    exchange = json.loads(path.read_text(encoding="utf-8"))
    assert path.name == f"{request_key(json.dumps(api.requests[0]).encode())}-0.json"
    assert exchange["request"]["body"] == api.requests[0]
    assert exchange["request"]["path"] == "/v1/messages"
    assert exchange["response"] == {"status": 200, "body": recorded("dedupe_same")}
    assert exchange["response"]["body"]["usage"]["input_tokens"] > 0
    # And no header, so never the key
    assert "headers" not in exchange["request"]
    assert API_KEY not in path.read_text(encoding="utf-8")


def test_an_error_status_and_its_retry_are_two_answers_to_one_request(tmp_path: Path) -> None:
    # Given an API that is overloaded once, then answers (the SDK retries the same body)
    api = RecordedApi(("error_overloaded", 529), "dedupe_same")
    judge = AnthropicDedupeJudge(
        ExtractConfig(),
        api_key=API_KEY,
        base_url="http://testserver",
        http_client=httpx2.Client(transport=httpx2.MockTransport(api.handle)),
        max_retries=1,
        record_dir=tmp_path,
    )
    # When the call succeeds on its retry
    judge.same_memory("a", "b")
    # Then both answers are kept, in order, under the same request's key
    first, second = files_in(tmp_path)
    assert first.name.endswith("-0.json") and second.name.endswith("-1.json")
    assert json.loads(first.read_text(encoding="utf-8"))["response"]["status"] == 529
    # And a replay answers the same way: the failure first, then the answer
    replay = RecordedExchanges(tmp_path)
    body = json.dumps(api.requests[0]).encode()
    assert [replay.answer(body)[0], replay.answer(body)[0]] == [529, 200]
    assert replay.unused() == 0


def test_bedrock_signatures_are_not_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given IAM credentials and a Bedrock extractor that records
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "test-session-token")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)
    seen: list[httpx2.Request] = []

    def handle(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(200, json=recorded("dedupe_same"))

    config = ExtractConfig(provider="bedrock", model="eu.anthropic.claude-haiku-4-5-20251001-v1:0")
    judge = AnthropicDedupeJudge(
        config,
        aws_region="eu-west-1",
        http_client=httpx2.Client(transport=httpx2.MockTransport(handle)),
        max_retries=0,
        record_dir=tmp_path,
    )
    # When it makes a signed call
    judge.same_memory("a", "b")
    # Then the request was signed, but neither the signature nor the credentials were written
    assert seen[0].headers["authorization"].startswith("AWS4-HMAC-SHA256")
    (path,) = files_in(tmp_path)
    text = path.read_text(encoding="utf-8")
    for secret in ("AWS4-HMAC-SHA256", "AKIDEXAMPLE", "test-secret", "test-session-token"):
        assert secret not in text
    assert json.loads(text)["request"]["path"].endswith("/invoke")


def test_concurrent_calls_get_distinct_names_and_leave_no_temporary_file(
    tmp_path: Path,
) -> None:
    # Given one recorder and 8 threads writing 5 exchanges each, half of them one same request
    recorder = ExchangeRecorder(tmp_path)

    def write(thread: int) -> None:
        for i in range(5):
            key = "same" if i % 2 else f"t{thread}-{i}"
            recorder.write(key, {"thread": thread, "i": i})

    threads = [threading.Thread(target=write, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then every exchange has a file of its own, numbered from 0 per request
    names = [path.name for path in files_in(tmp_path)]
    assert len(names) == 40
    assert sorted(n for n in names if n.startswith("same-")) == sorted(
        f"same-{n}.json" for n in range(16)
    )
    # And nothing half-written is left behind
    assert not [name for name in names if name.startswith(".")]


def test_a_second_recorder_into_the_same_directory_overwrites_nothing(tmp_path: Path) -> None:
    # Given a directory that already holds an exchange (another run, another process)
    ExchangeRecorder(tmp_path).write("k", {"run": 1})
    # When a new recorder writes the same request's answer
    path = ExchangeRecorder(tmp_path).write("k", {"run": 2})
    # Then it takes the next number, and the first is untouched
    assert path.name == "k-1.json"
    assert json.loads((tmp_path / "k-0.json").read_text(encoding="utf-8")) == {"run": 1}


def test_the_replay_matches_by_request_not_by_order(tmp_path: Path) -> None:
    # Given two recorded exchanges, A then B
    recorder = ExchangeRecorder(tmp_path)
    bodies = {name: json.dumps({"ask": name}).encode() for name in "AB"}
    for name, body in bodies.items():
        recorder.write(
            request_key(body),
            {"key": request_key(body), "response": {"status": 200, "body": {"answer": name}}},
        )
    replay = RecordedExchanges(tmp_path)
    # When they are asked for in the other order, keys reordered, plus one never recorded
    assert replay.answer(b'{ "ask" : "B" }') == (200, {"answer": "B"})
    assert replay.answer(bodies["A"]) == (200, {"answer": "A"})
    status, _ = replay.answer(b'{"ask": "C"}')
    # Then each got its own answer, and the unknown one a 400 the test can name
    assert status == 400
    assert replay.unmatched == [{"ask": "C"}]


def test_the_environment_variable_reaches_every_model_adapter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given MEMWRITE_LLM_RECORD in a deployment's environment, with a key
    environ = {
        "MEMWRITE_BACKEND": "sqlite",
        "MEMWRITE_DATA_DIR": str(tmp_path / "data"),
        "ANTHROPIC_API_KEY": API_KEY,
        "MEMWRITE_LLM_RECORD": str(tmp_path / "rec"),
    }
    adapters = Adapters.of(LambdaEnvironment.load(environ))
    # When the model adapters are built
    built = [
        adapters.extraction_llm(),
        adapters.resolve_judge(),
        adapters.dedupe_judge(),
        adapters.questions(),
    ]
    # Then each one's HTTP client records into that directory
    for adapter in built:
        client = adapter._client._client._client  # adapter -> StructuredClient -> SDK -> httpx
        (hook,) = client.event_hooks["response"]
        assert isinstance(hook, ExchangeRecorder)
        assert hook.directory == tmp_path / "rec"
    assert isinstance(built[0], AnthropicExtractorClient)
