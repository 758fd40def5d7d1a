"""`memwrite eval` on small hand-written data sets in both formats: the readers, the scoring,
the baseline, and the command's outputs (the JSON contract, the table, the charts)."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memwrite_local.cli import main
from memwrite_local.evaluation.baseline import RawTurnIndex
from memwrite_local.evaluation.data import DataFormat, Question, read_dataset
from memwrite_local.evaluation.evaluate import question_user, recall_at_k, sessions_as
from memwrite_local.runtime.pipeline import run_sessions
from tests.cli_process import run_memwrite

TIMEOUT_SECS = 120
CONTRACT_KEYS = {
    *("name", "turns", "dropped_by_stage", "dropped_by_reason", "fact_bearing_recall"),
    *("llm_calls_per_turn", "deferred_turns", "memories_per_1000_turns", "supersessions"),
    *("items_stored", "recall_at_k", "baseline_items_stored", "baseline_raw_bm25_recall_at_k"),
    *("items_by_kind", "recall_at_k_memories_only"),
}


def _turn(dia_id: str, speaker: str, text: str) -> dict[str, str]:
    return {"speaker": speaker, "dia_id": dia_id, "text": text}


LOCOMO_SAMPLE: dict[str, Any] = {
    "sample_id": "conv-test",
    "conversation": {
        "speaker_a": "Ana",
        "speaker_b": "Ben",
        "session_1_date_time": "9:05 am on 3 March, 2024",
        "session_1": [
            _turn("D1:1", "Ana", "Hey Ben! I live in Berlin now, it is lovely."),
            _turn("D1:2", "Ben", "Nice! Where do you work these days?"),
            _turn("D1:3", "Ana", "I work at SAP on the payroll team."),
            _turn("D1:4", "Ben", "I love hiking in the Alps every summer."),
        ],
        "session_2_date_time": "6:30 pm on 10 April, 2024",
        "session_2": [
            _turn("D2:1", "Ben", "Thanks, that was fun!"),
            _turn("D2:2", "Ana", "My sister is called Eva and she paints."),
        ],
    },
    "qa": [
        {
            "question": "Where does Ana live?",
            "answer": "Berlin",
            "evidence": ["D1:1"],
            "category": 4,
        },
        {
            "question": "What does Ben love?",
            "answer": "hiking",
            "evidence": ["D1:4"],
            "category": 4,
        },
        {"question": "Who is Eva?", "answer": "sister", "evidence": ["D2:2; D1:3"], "category": 1},
        {"question": "What is unknown?", "adversarial_answer": "x", "evidence": [], "category": 5},
    ],
    "observation": {
        "session_1_observation": {"Ana": [["Ana works at SAP.", ["D1:3"]]], "Ben": []},
        "session_2_observation": {"Ana": [["Ana's sister Eva paints.", "D2:2"]]},
    },
}


def _message(message_id: int, role: str, content: str, day: int) -> dict[str, Any]:
    return {
        "message_id": message_id,
        "role": role,
        "content": content,
        "timestamp": f"2025-05-{day:02d}T09:00:{message_id:02d}",
        "session_id": f"session-{day:03d}",
        "day": day,
    }


CRI_MESSAGES = [
    _message(1, "user", "Hello again. I live in Berlin.", 1),
    _message(2, "assistant", "Berlin is a great city. What brings you here today?", 1),
    _message(3, "user", "Thanks, that was helpful.", 1),
    _message(4, "user", "I love hiking.", 2),
    _message(5, "user", "Big news: I moved to Lisbon.", 9),
    _message(6, "assistant", "Congratulations on the move to Lisbon!", 9),
]
CRI_TRUTH = {
    "changes": [
        {
            "fact": "city",
            "old_value": "Berlin",
            "new_value": "Lisbon, Portugal",
            "query_topic": "current location",
            "changed_around_msg": 5,
            "key_messages": [1, 5],
        }
    ],
    "noise_examples": [
        {"text": "Thanks, that was helpful.", "reason": "gratitude"},
        {"text": "I love hiking.", "reason": "a preference the test counts as noise"},
    ],
    "signal_examples": [{"text": "I moved to Lisbon", "target_fact": "city: Lisbon"}],
}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("eval-data")
    (root / "locomo").mkdir()
    (root / "locomo" / "sample.json").write_text(json.dumps([LOCOMO_SAMPLE]), encoding="utf-8")
    cri = root / "cri-test"
    cri.mkdir()
    lines = "".join(json.dumps(message) + "\n" for message in CRI_MESSAGES)
    (cri / "conversations.jsonl").write_text(lines, encoding="utf-8")
    (cri / "ground_truth.json").write_text(json.dumps(CRI_TRUTH), encoding="utf-8")
    return root


def _memwrite(*args: str) -> subprocess.CompletedProcess[str]:
    return run_memwrite(*args, timeout=TIMEOUT_SECS)


@pytest.fixture(scope="module")
def json_run(
    data_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[subprocess.CompletedProcess[str], Path]:
    charts = tmp_path_factory.mktemp("charts")
    result = _memwrite(
        *("eval", "--format", "locomo", str(data_dir / "locomo")),
        *("--format", "cri", str(data_dir / "cri-test"), "--json", "--charts", str(charts)),
    )
    return result, charts


def _datasets(run: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    return {dataset["name"]: dataset for dataset in json.loads(run.stdout)["datasets"]}


def test_locomo_reader_builds_dated_turns_users_and_fact_bearing_refs(data_dir: Path) -> None:
    # When the hand-written LoCoMo file is read
    dataset = read_dataset(DataFormat.LOCOMO, data_dir / "locomo")

    # Then it is one conversation of both speakers, its turns at their session's date in order
    (conversation,) = dataset.conversations
    assert dataset.name == "locomo"
    assert conversation.users == ("Ana", "Ben")
    refs = [turn.ref for turn in conversation.turns]
    assert refs == ["D1:1", "D1:2", "D1:3", "D1:4", "D2:1", "D2:2"]
    assert conversation.turns[0].timestamp == datetime(2024, 3, 3, 9, 5, tzinfo=UTC)
    assert conversation.turns[1].timestamp == datetime(2024, 3, 3, 9, 5, 1, tzinfo=UTC)
    assert conversation.turns[4].timestamp == datetime(2024, 4, 10, 18, 30, tzinfo=UTC)
    # And QA items without evidence are left out; "D2:2; D1:3" is two evidence ids
    assert [q.evidence for q in conversation.questions] == [
        frozenset({"D1:1"}),
        frozenset({"D1:4"}),
        frozenset({"D2:2", "D1:3"}),
    ]
    # And fact-bearing turns are QA evidence or cited by an observation (one id or a list)
    assert conversation.fact_bearing == {"D1:1", "D1:3", "D1:4", "D2:2"}


def test_cri_reader_reads_changes_noise_and_the_user(data_dir: Path) -> None:
    # When the hand-written CRI directory is read
    dataset = read_dataset(DataFormat.CRI, data_dir / "cri-test")

    # Then its one conversation is run as the user only, with naive times read as UTC
    (conversation,) = dataset.conversations
    assert conversation.users == ("user",)
    assert conversation.turns[0].timestamp == datetime(2025, 5, 1, 9, 0, 1, tzinfo=UTC)
    # And the change keeps its key messages, each noise example the message(s) holding it
    (change,) = conversation.changes
    assert (change.old_value, change.key_refs) == ("Berlin", frozenset({"1", "5"}))
    assert conversation.noise_refs == (frozenset({"3"}), frozenset({"4"}))
    # And fact-bearing turns are the change's key messages and the signal examples' messages
    assert conversation.fact_bearing == {"1", "5"}
    assert conversation.questions == (
        Question(question="current location", evidence=frozenset({"1", "5"})),
    )


def test_reader_refuses_a_missing_path(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no such file"):
        read_dataset(DataFormat.CRI, tmp_path / "absent")


def test_each_data_set_session_is_sent_as_its_own_api_session(data_dir: Path) -> None:
    # Given both formats, each with two or more sessions
    (locomo,) = read_dataset(DataFormat.LOCOMO, data_dir / "locomo").conversations
    (cri,) = read_dataset(DataFormat.CRI, data_dir / "cri-test").conversations

    # When they are turned into what the user sends
    ana = sessions_as(locomo, "Ana")
    user = sessions_as(cri, "user")

    # Then every session of the data is one request under its own session id, in order
    assert [body["session_id"] for body in ana] == ["conv-test-session_1", "conv-test-session_2"]
    assert [len(body["turns"]) for body in ana] == [4, 2]  # type: ignore[arg-type]
    assert [body["session_id"] for body in user] == [
        "cri-test-session-001",
        "cri-test-session-002",
        "cri-test-session-009",
    ]
    # And the other speaker's turns are assistant turns
    roles = [turn["role"] for turn in ana[0]["turns"]]  # type: ignore[attr-defined]
    assert roles == ["user", "assistant", "user", "assistant"]


def test_memories_keep_the_session_they_were_said_in() -> None:
    # Given one user's two sessions, each stating a fact the rule extractor stores
    sessions = [
        {"user_id": "ana", "session_id": f"s{n}", "turns": [{"role": "user", "content": text}]}
        for n, text in enumerate(["I live in Berlin.", "My sister is called Eva."], start=1)
    ]

    # When they run through the local pipeline on one state
    run = run_sessions(sessions)

    # Then each memory names the session it came from
    assert {memory.source_session for memory in run.memories} == {"s1", "s2"}


def test_recall_at_k_counts_a_hit_only_within_the_first_k() -> None:
    ranked = ["D1:2", None, "D1:9", "D1:1"]
    assert not recall_at_k(ranked, frozenset({"D1:1"}), 3)
    assert recall_at_k(ranked, frozenset({"D1:1"}), 4)
    assert recall_at_k(ranked, frozenset({"D1:1", "D1:2"}), 1)
    assert not recall_at_k([], frozenset({"D1:1"}), 10)


def test_a_question_goes_to_the_speaker_of_most_of_its_evidence(data_dir: Path) -> None:
    (conversation,) = read_dataset(DataFormat.LOCOMO, data_dir / "locomo").conversations
    assert question_user(Question(question="q", evidence=frozenset({"D1:4"})), conversation) == (
        "Ben"
    )
    # A tie goes to the speaker of the first evidence turn
    tie = Question(question="q", evidence=frozenset({"D2:1", "D1:1"}))
    assert question_user(tie, conversation) == "Ana"


def test_baseline_stores_every_turn_and_finds_it_with_bm25() -> None:
    # Given three raw turns
    raw = RawTurnIndex("ana", [("D1:1", "I live in Berlin now"), ("D1:2", "Where do you work?")])
    try:
        # Then each is one stored item, and BM25 finds the one that shares the query's words
        assert len(raw) == 2
        assert raw.search("Where does Ana live? Berlin?", 5) == ["D1:1"]
        assert raw.search("the a of", 5) == []  # stop words only: nothing to match
    finally:
        raw.close()


def test_json_is_one_document_with_the_contract(
    json_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    # When `memwrite eval --json` runs both data sets
    result, _ = json_run

    # Then stdout is exactly one JSON document: a line per data set's contract
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n") == 1
    document = json.loads(result.stdout)
    assert [d["name"] for d in document["datasets"]] == ["locomo", "cri-test"]
    for dataset in document["datasets"]:
        assert set(dataset) >= CONTRACT_KEYS
        assert set(dataset["recall_at_k"]) == set(dataset["baseline_raw_bm25_recall_at_k"])
        assert set(dataset["recall_at_k"]) == {"5", "10"}
    # And no progress bar is drawn (--json, and stderr is no terminal)
    assert "memwrite eval" not in result.stderr


def test_locomo_scores_follow_the_data(
    json_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    locomo = _datasets(json_run[0])["locomo"]
    # Six turns, run once per speaker: twelve turns in, the other speaker's as assistant turns
    assert (locomo["turns"], locomo["conversation_turns"], locomo["runs"]) == (12, 6, 2)
    assert locomo["dropped_by_reason"]["AssistantTurn"] >= 3
    assert sum(locomo["dropped_by_stage"].values()) == sum(locomo["dropped_by_reason"].values())
    # Every fact-bearing turn is a statement the pre-filter keeps
    assert (locomo["fact_bearing_turns"], locomo["fact_bearing_recall"]) == (4, 1.0)
    # The rules store the user's own claims (Berlin, SAP, hiking, the sister), one run each;
    # what they cannot handle whole is kept as an episode; items stored counts both kinds
    by_kind = locomo["items_by_kind"]
    assert by_kind["memory"] >= 1
    assert locomo["items_stored"] == by_kind["memory"] + by_kind["episode"] >= 3
    assert locomo["memories_per_1000_turns"] == pytest.approx(
        1000 * by_kind["memory"] / 12, abs=0.001
    )
    assert set(locomo["recall_at_k_memories_only"]) == {"5", "10"}
    # Both memwrite and the raw BM25 anchor find Ana's city; the anchor stores every turn
    assert locomo["qa_items"] == 3
    assert locomo["recall_at_k"]["5"] > 0
    assert locomo["baseline_items_stored"] == 12
    assert locomo["baseline_raw_bm25_recall_at_k"]["5"] > 0
    assert locomo["llm_calls_per_turn"] == 0.0
    assert locomo["cri"] is None


def test_cri_change_and_noise_are_counted(
    json_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    cri = _datasets(json_run[0])["cri-test"]
    # Berlin is superseded by Lisbon: the change ends with the new value active
    assert cri["supersessions"] >= 1
    assert cri["cri"]["changes"] == 1
    assert cri["cri"]["changes_new_active_old_superseded"] == 1
    # "Thanks, that was helpful." makes no memory; "I love hiking." does
    assert cri["cri"]["noise_examples"] == 2
    assert cri["cri"]["noise_examples_with_memory"] == 1


def test_charts_are_written_as_png(
    json_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    result, charts = json_run
    listed = json.loads(result.stdout)["charts"]
    expected = {
        *("locomo-funnel.png", "locomo-rejections.png"),
        *("cri-test-funnel.png", "cri-test-rejections.png"),
    }
    assert {Path(path).name for path in listed} == expected
    for name in expected:
        assert (charts / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_table_names_the_measures_and_the_charts(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # When eval runs without --json, a --format given before its path
    status = main(
        ["eval", "--format", "cri", "--charts", str(tmp_path), str(data_dir / "cri-test")]
    )

    # Then stdout is the table, then the chart paths
    out = capsys.readouterr().out
    assert status == 0
    assert "cri-test" in out.splitlines()[0]
    assert "recall@5/10: raw turns + BM25" in out
    assert "CRI changes: new active, old superseded" in out
    assert str(tmp_path / "cri-test-funnel.png") in out


def test_llm_without_a_key_fails_clearly(data_dir: Path) -> None:
    # When --llm is asked for without ANTHROPIC_API_KEY
    result = _memwrite("eval", "--format", "cri", str(data_dir / "cri-test"), "--llm")

    # Then it fails, says why, and reports nothing
    assert result.returncode == 2
    assert "ANTHROPIC_API_KEY" in result.stderr
    assert result.stdout == ""


def test_an_unknown_format_is_a_usage_error(data_dir: Path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", "--format", "csv", str(data_dir)])
    assert exit_info.value.code == 2
