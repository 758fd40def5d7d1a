"""The `memwrite` command line, run as a user runs it: a subprocess from the repository root.

Each command runs as a subprocess at least once; the data a test prepares with another command,
and a command's further runs, go through `run_memwrite_in_process` (the same command line in
this process: no interpreter start and imports, seconds each). A test that keeps data in a data
directory reads it at least once in another process than the one that wrote it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.cli_process import run_memwrite, run_memwrite_in_process
from tests.serve_process import running_serve

REPO_ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_SECS = 180  # a hang guard, not a timing: a busy machine is slow
Runner = Callable[..., subprocess.CompletedProcess[str]]  # `_memwrite` or `_here`


def _memwrite(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return run_memwrite(*args, stdin=stdin, timeout=TIMEOUT_SECS)


def _here(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return run_memwrite_in_process(*args, stdin=stdin)


def _lines(*records: dict[str, object] | str) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)


def test_prefilter_prints_one_decision_per_line_in_order():
    # Given JSON lines covering a skip, a pass, an assistant turn, a redaction and a
    # sentence-level cut
    stdin = _lines(
        {"role": "user", "content": "hi"},
        {"role": "user", "content": "Priya said the Inbox3 deadline is Friday"},
        {"role": "assistant", "content": "Berlin is a great city to live in."},
        {"role": "user", "content": "Pay with card 4111 1111 1111 1111. I'm allergic to peanuts."},
        {"role": "user", "content": "Yeah, got it. By the way my team is switching to Linear."},
    )

    # When `memwrite prefilter` reads them
    result = _memwrite("prefilter", stdin=stdin)

    # Then it succeeds with exactly one JSON line per input, same order, exactly three keys
    assert result.returncode == 0, result.stderr
    out = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(out) == 5
    assert all(set(line) == {"decision", "reason", "text"} for line in out)
    assert out == [
        {
            "decision": "skip",
            "reason": {"type": "TooShort", "word_count": 1, "min_words": 3},
            "text": None,
        },
        {"decision": "pass", "reason": None, "text": "Priya said the Inbox3 deadline is Friday"},
        {"decision": "skip", "reason": {"type": "AssistantTurn"}, "text": None},
        {
            "decision": "pass",
            "reason": None,
            "text": "Pay with card [REDACTED:card_number]. I'm allergic to peanuts.",
        },
        {
            "decision": "pass",
            "reason": None,
            "text": "By the way my team is switching to Linear.",
        },
    ]
    # And the card number never reaches the output
    assert "4111" not in result.stdout + result.stderr


def test_prefilter_sessions_keep_short_answers_with_their_question():
    # Given two interleaved-free conversations with timestamps, a short answer in each, a line
    # without a session in between, and a secret in one question
    stdin = _lines(
        {"role": "assistant", "content": "Which city did you grow up in?", "session_id": "a"},
        {"role": "user", "content": "Porto", "session_id": "a", "timestamp": "2024-03-01T10:00"},
        {"role": "user", "content": "Is ana.reis@example.pt your work mail?", "session_id": "b"},
        {"role": "user", "content": "Nope", "session_id": "b", "timestamp": 1709287200},
        {"role": "user", "content": "What do you drink in the morning?"},
        {"role": "user", "content": "Coffee"},
    )

    # When `memwrite prefilter` reads them
    result = _here("prefilter", stdin=stdin)

    # Then each short answer passes with its question as context; the line without a session
    # is screened alone, exactly as before (too short, no context key)
    assert result.returncode == 0, result.stderr
    out = [json.loads(line) for line in result.stdout.splitlines()]
    assert out[1] == {
        "decision": "pass",
        "reason": None,
        "text": "Porto",
        "context": "Which city did you grow up in?",
    }
    assert out[3]["context"] == "Is [REDACTED:email] your work mail?"
    assert out[5] == {
        "decision": "skip",
        "reason": {"type": "TooShort", "word_count": 1, "min_words": 3},
        "text": None,
    }
    # And the e-mail address never reaches the output
    assert "ana.reis" not in result.stdout + result.stderr


def test_prefilter_replayed_history_uses_line_timestamps_for_the_rate_gate():
    # Given the same sentence twice in one session, two days apart, then twice within a minute
    said = "I water the balcony plants every evening."
    stdin = _lines(
        {"role": "user", "content": said, "session_id": "s", "timestamp": "2024-05-01T08:00Z"},
        {"role": "user", "content": said, "session_id": "s", "timestamp": "2024-05-03T08:00Z"},
        {"role": "user", "content": said, "session_id": "s", "timestamp": "2024-05-03T08:00:30Z"},
    )

    # When replayed through `memwrite prefilter`
    result = _here("prefilter", stdin=stdin)

    # Then only the repeat within the window is rate-limited
    out = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["decision"] for line in out] == ["pass", "pass", "skip"]
    assert out[2]["reason"] == {"type": "RateLimited", "window_secs": 60}


def test_prefilter_reports_a_bad_line_in_place_and_fails():
    # Given a stream whose second line is not a valid turn (and a blank line, which is ignored)
    stdin = _lines(
        {"role": "user", "content": "I live in Berlin with my partner Alex."},
        '{"role": "user"',
        "",
        {"role": "user", "content": "My manager moved our 1:1 to Thursday"},
    )

    # When `memwrite prefilter` reads it
    result = _here("prefilter", stdin=stdin)

    # Then every input line still gets its output line in order, the bad one as an error,
    # stderr says which line, and the exit status tells a script something went wrong
    out = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["decision"] for line in out] == ["pass", "error", "pass"]
    assert out[1] == {"decision": "error", "reason": None, "text": None}
    assert "line 2" in result.stderr
    assert result.returncode == 1


def test_demo_prints_the_funnel():
    # Given the sample conversation shipped in events/conversations
    # When a new user runs `memwrite demo`
    result = _memwrite("demo")

    # Then it exits 0 and prints the funnel: turns in, drops per reason, what survived
    assert result.returncode == 0, result.stderr
    turns_in = re.search(r"^turns in\s+(\d+)$", result.stdout, re.MULTILINE)
    survivors = re.search(r"^(?:survivors|surviving turns)\s+(\d+)$", result.stdout, re.MULTILINE)
    assert turns_in is not None, result.stdout
    assert survivors is not None, result.stdout
    assert 0 < int(survivors.group(1)) < int(turns_in.group(1))
    assert re.search(r"^\s+pre_filter\s+dropped\s+\d+$", result.stdout, re.MULTILINE)
    # And the trace of the run, fully processed
    assert re.search(r"^trace [0-9a-f]{32}: complete,", result.stdout, re.MULTILINE)
    # And no EMF metric line floods the terminal
    assert '"_aws"' not in result.stdout
    # And an outage keeps episodes that a backfill (recorded answers) then distils
    assert re.search(r"^  pending\s+[0-9a-f]{12}\s+DeferredModelFailed", result.stdout, re.M)
    assert re.search(r"^  episode\s+[0-9.]+\s+We packed", result.stdout, re.MULTILINE)
    assert re.search(r"2 of 2 episodes extracted, 3 memories, 2 LLM calls", result.stdout)
    assert re.search(r"^  superseded The user moved to Lisbon", result.stdout, re.MULTILINE)
    assert re.search(r"^  active\s+The user moved to Porto", result.stdout, re.MULTILINE)
    assert "a second backfill: 0 pending episodes (a no-op)" in result.stdout


def test_backfill_command_distils_nothing_offline_and_names_what_is_missing(
    tmp_path: Path,
) -> None:
    # Given a data dir with a kept episode, and no model configured
    conversation = tmp_path / "c.json"
    conversation.write_text(
        json.dumps(
            {
                "session_id": "s",
                "user_id": "sam",
                "turns": [{"role": "user", "content": "Our team is migrating billing to Rust."}],
            }
        ),
        encoding="utf-8",
    )
    data_dir = tmp_path / "data"
    assert _here("ingest", str(conversation), "--data-dir", str(data_dir)).returncode == 0
    # When backfilled offline / Then it refuses, naming the missing model, and changes nothing
    refused = _offline("backfill", "--user", "sam", "--data-dir", str(data_dir), stdin="")
    assert (refused.returncode, refused.stdout.split(":")[0]) == (1, "model_required")
    # And an unknown user, and bad times, are named
    unknown = _here("backfill", "--user", "nobody", "--data-dir", str(data_dir))
    assert unknown.stdout.startswith("not_found: user_id")
    bad = _here(
        "backfill", "--since", "2026-02-01", "--until", "2026-01-01", "--data-dir", str(data_dir)
    )
    assert (bad.returncode, bad.stdout.split(":")[:2]) == (1, ["invalid_request", " until"])
    # And the batch lane refuses the same way, submitting nothing
    batch = _here("backfill", "--mode", "batch", "--data-dir", str(data_dir))
    assert (batch.returncode, batch.stdout.split(":")[0]) == (1, "model_required")


def test_expire_announces_passed_expiries_once(tmp_path: Path) -> None:
    # Given a data dir whose memory's expiry passed unannounced (a file from before the sweep)
    from memwrite.adapters.sqlite.database import SqliteDatabase
    from memwrite.adapters.sqlite.store import SqliteMemoryStore
    from memwrite.records.store import Commit, OutboxOp, OutboxRow
    from memwrite_local.runtime.backend import LOCAL_TENANT

    conversation = tmp_path / "c.json"
    turns = [{"role": "user", "content": "I live in Lisbon."}]
    conversation.write_text(json.dumps({"session_id": "s", "user_id": "sam", "turns": turns}))
    data_dir = tmp_path / "data"
    assert _here("ingest", str(conversation), "--data-dir", str(data_dir)).returncode == 0
    database = SqliteDatabase(data_dir)
    store = SqliteMemoryStore(database)
    [memory] = store.memories_of(LOCAL_TENANT, "sam")
    rev = store.get_memories(LOCAL_TENANT, "sam", [memory.memory_id])[memory.memory_id].rev
    expired = memory.model_copy(update={"expires_on": datetime(2025, 1, 1, tzinfo=UTC)})
    store.commit(
        Commit(
            tenant=LOCAL_TENANT,
            user_id="sam",
            trace_id=memory.trace_id,
            memories=[(expired, rev)],
            outbox=[OutboxRow(memory.memory_id, OutboxOp.UPSERT, memory.trace_id)],
            from_trace=False,
        )
    )
    database.close()

    # When `memwrite expire` runs twice / Then the first announces it, the second finds nothing
    first = _offline("expire", "--json", "--data-dir", str(data_dir), stdin="")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == {
        "announced": 1,
        "unindexed": [],
        "deliveries_waiting": 0,
    }
    again = _here("expire", "--data-dir", str(data_dir))
    assert again.stdout == "0 expiries announced (memory.expired)\n"


def _offline(*args: str, stdin: str) -> subprocess.CompletedProcess[str]:
    # No API key: the rules are the only extractor, whatever the caller's environment holds.
    saved = os.environ.pop("ANTHROPIC_API_KEY", None)
    try:
        return _memwrite(*args, stdin=stdin)
    finally:
        if saved is not None:
            os.environ["ANTHROPIC_API_KEY"] = saved


def test_extract_prints_candidates_and_extractor_per_line_in_order():
    # Given a rule-covered compound claim, a turn beyond the rules, and a hypothetical
    stdin = _lines(
        {"role": "user", "content": "I live in Berlin and work at SAP."},
        {"role": "user", "content": "Our team is migrating billing to Rust this summer."},
        {
            "role": "user",
            "content": "If I were a pilot I would fly to Rome.",
            "timestamp": "2026-03-02T09:00:00Z",
        },
    )

    # When `memwrite extract` reads them offline
    result = _offline("extract", stdin=stdin)

    # Then one line per input, exactly {candidates, extractor}, in order
    assert result.returncode == 0, result.stderr
    out = [json.loads(line) for line in result.stdout.splitlines()]
    assert all(set(line) == {"candidates", "extractor"} for line in out)
    assert [line["extractor"] for line in out] == ["rules", "deferred", "rules"]
    assert [(c["attribute"], c["value"]) for c in out[0]["candidates"]] == [
        ("lives_in", "Berlin"),
        ("works_at", "SAP"),
    ]
    # And nothing is invented for what the rules cannot read, nor kept from a hypothetical
    assert out[1]["candidates"] == []
    assert out[2]["candidates"] == []


def test_extract_reports_a_bad_line_without_losing_alignment():
    stdin = _lines("not json", {"role": "user", "content": "I'm vegan."})
    result = _here("extract", stdin=stdin)
    out = [json.loads(line) for line in result.stdout.splitlines()]
    assert result.returncode == 1
    assert "line 1" in result.stderr
    assert out[0]["extractor"] is None and "line 1" in out[0]["error"]
    assert [(c["attribute"], c["value"]) for c in out[1]["candidates"]] == [("diet", "vegan")]


def test_serve_uses_the_api_keys_of_its_environment(tmp_path: Path) -> None:
    # Given MEMWRITE_API_KEYS set in the shell that starts `memwrite serve`
    with running_serve(tmp_path / "data", {"MEMWRITE_API_KEYS": "shell-key=shell"}) as server:
        # When a request is sent with that key, and one with the default local key
        def post(api_key: str) -> int:
            request = urllib.request.Request(
                f"{server.base_url}/v1/turns",
                data=json.dumps(
                    {
                        "session_id": "s1",
                        "user_id": "dana",
                        "turns": [{"role": "user", "content": "hi"}],
                    }
                ).encode(),
                headers={"Content-Type": "application/json", "x-api-key": api_key},
                method="POST",
            )
            try:
                with urllib.request.urlopen(request, timeout=TIMEOUT_SECS) as reply:
                    return int(reply.status)
            except urllib.error.HTTPError as error:
                return error.code

        # Then the shell's key is accepted and the default one is not
        assert post("shell-key") == 202
        assert post("local-dev-key") == 401
        assert "local-dev-key" not in server.banner


def _ingest_json(*args: str, run: Runner = _here) -> dict[str, Any]:
    result = run("ingest", "--json", *args)
    assert result.returncode == 0, result.stderr
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def test_ingest_is_fresh_unless_given_a_data_dir(tmp_path: Path) -> None:
    # Given two conversations of one user, in two files
    home, work = tmp_path / "home.json", tmp_path / "work.json"
    for path, content in [(home, "I live in Berlin."), (work, "I work at SAP.")]:
        conversation = {"user_id": "dana", "turns": [{"role": "user", "content": content}]}
        path.write_text(json.dumps(conversation), encoding="utf-8")
    data = tmp_path / "data"

    # When both are ingested into one data directory / Then the second run (another process)
    # keeps the first's
    _ingest_json(str(home), "--data-dir", str(data), run=_memwrite)
    kept = _ingest_json(str(work), "--data-dir", str(data))
    assert sorted(m["value"] for m in kept["memories"]) == ["Berlin", "SAP"]
    # And without a data directory each run starts from nothing, on either backend
    for backend in ("sqlite", "moto"):
        fresh = _ingest_json(str(work), "--backend", backend)
        assert [m["value"] for m in fresh["memories"]] == ["SAP"]


def _call(base_url: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    request = urllib.request.Request(
        base_url + path,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Content-Type": "application/json", "x-api-key": "local-dev-key"},
        method=method,
    )
    with urllib.request.urlopen(request, timeout=TIMEOUT_SECS) as reply:
        return json.loads(reply.read())


def test_serve_keeps_what_it_acknowledged_across_a_restart(tmp_path: Path) -> None:
    # Given `memwrite serve` on a data directory that acknowledged a conversation
    conversation = json.loads((REPO_ROOT / "events/conversations/moving.json").read_text())
    with running_serve(tmp_path / "data") as server:
        posted = _call(server.base_url, "POST", "/v1/turns", conversation)
        # When it is stopped right after the 202, whatever the pipeline had done by then
    # Then a restarted server finishes the work and has the trace and its memories
    with running_serve(tmp_path / "data") as server:
        path = f"/v1/traces/{posted['trace_id']}"
        trace = _call(server.base_url, "GET", path)
        deadline = time.monotonic() + TIMEOUT_SECS
        while trace["status"] != "complete" and time.monotonic() < deadline:
            time.sleep(0.1)
            trace = _call(server.base_url, "GET", path)
        assert trace["status"] == "complete"
        assert trace["outcome"]["stored"] > 0
        # And re-sending the conversation finds every accepted turn already taken
        again = _call(server.base_url, "POST", "/v1/turns", conversation)
        skipped = {item["turn_id"] for item in posted["skipped"]}
        assert again["accepted"] == 0
        assert sorted(again["duplicates"]) == sorted(set(posted["turn_ids"]) - skipped)


def test_trace_and_replay_read_the_local_data_directory(tmp_path: Path) -> None:
    # Given a conversation ingested into a data directory
    conversation = {
        "user_id": "dana",
        "turns": [
            {"role": "user", "content": "hi"},
            {"role": "user", "content": "I like jazz"},
            {"role": "user", "content": "I live in Berlin with my partner Alex."},
        ],
    }
    path, data = tmp_path / "talk.json", str(tmp_path / "data")
    path.write_text(json.dumps(conversation), encoding="utf-8")
    _ingest_json(str(path), "--data-dir", data)

    # When the user's traces are listed / Then the one trace is there, complete
    listed = _memwrite("trace", "--user", "dana", "--since", "2020-01-01", "--data-dir", data)
    assert listed.returncode == 0, listed.stderr
    trace_id = re.findall(r"[0-9a-f]{32}", listed.stdout)[0]
    assert "complete" in listed.stdout
    # And the trace's table shows every stage with its typed reasons
    shown = _here("trace", trace_id, "--data-dir", data)
    assert shown.returncode == 0, shown.stderr
    assert "TooShort{word_count=1, min_words=3}" in shown.stdout
    assert all(stage in shown.stdout for stage in ("pre_filter", "extract", "persist"))

    # When the trace is replayed with a stricter pre-filter
    replayed = _memwrite(
        "replay", trace_id, "--set", "pre_filter.min_words=4", "--json", "--data-dir", data
    )
    # Then the three-word turn is newly dropped and its memory no longer written
    assert replayed.returncode == 0, replayed.stderr
    diff = json.loads(replayed.stdout)
    assert [
        c["after"]["reason"]["type"] for c in diff["stages"]["pre_filter"]["newly_dropped"]
    ] == ["TooShort"]
    assert [m["text"] for m in diff["memories"]["no_longer_written"]] == ["The user likes jazz."]
    # And an unknown config field fails naming it
    refused = _here("replay", trace_id, "--set", "pre_filter.min_wordz=4", "--data-dir", data)
    assert refused.returncode == 1
    assert "config.pre_filter.min_wordz" in refused.stdout


def test_rollback_undoes_one_ingested_trace_of_a_data_dir(tmp_path: Path) -> None:
    # Given Paris, then a move to Berlin, ingested into one data directory
    data = tmp_path / "data"
    for name, content, at in [
        ("paris", "I live in Paris.", "2025-01-05T10:00:00Z"),
        ("berlin", "I moved to Berlin.", "2025-06-01T09:00:00Z"),
    ]:
        path = tmp_path / f"{name}.json"
        turns = [{"role": "user", "content": content, "timestamp": at}]
        path.write_text(json.dumps({"user_id": "dana", "turns": turns}), encoding="utf-8")
        moved = _ingest_json(str(path), "--data-dir", str(data))
    [trace_id] = moved["trace_ids"]

    # When the move's trace is rolled back, twice
    first = _memwrite("rollback", trace_id, "--json", "--data-dir", str(data))
    again = _here("rollback", trace_id, "--json", "--data-dir", str(data))

    # Then the record says what went and came back, the same both times
    assert first.returncode == 0, first.stderr
    record = json.loads(first.stdout)
    assert (record["requested_via"], len(record["removed"]), len(record["restored"])) == (
        "cli",
        1,
        1,
    )
    assert again.returncode == 0 and json.loads(again.stdout) == record
    # And Paris is the user's current city again
    kept = _ingest_json(str(tmp_path / "paris.json"), "--data-dir", str(data), "--query", "Paris")
    assert [(m["value"], m["superseded_by"]) for m in kept["memories"]] == [("Paris", None)]
    assert [hit["value"] for hit in kept["queries"][0]["results"]] == ["Paris"]
    # And an unknown trace, or a directory without data, is refused
    unknown = _here("rollback", "f" * 32, "--data-dir", str(data))
    assert unknown.returncode == 1 and "not_found" in unknown.stdout
    missing = _here("rollback", trace_id, "--data-dir", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "holds no memwrite data" in missing.stderr


def test_export_and_import_move_a_user_to_another_data_dir(tmp_path: Path) -> None:
    # Given a move from Paris to Berlin ingested into one data directory, exported
    source, target = tmp_path / "source", tmp_path / "target"
    turns = [
        {"role": "user", "content": "I live in Paris.", "timestamp": "2025-01-05T10:00:00Z"},
        {"role": "user", "content": "I moved to Berlin.", "timestamp": "2025-06-01T09:00:00Z"},
    ]
    conversation = tmp_path / "moves.json"
    conversation.write_text(json.dumps({"user_id": "dana", "turns": turns}), encoding="utf-8")
    _ingest_json(str(conversation), "--data-dir", str(source))
    exported = _memwrite("export", "--user", "dana", "--data-dir", str(source))
    assert exported.returncode == 0, exported.stderr
    export_file = tmp_path / "dana.ndjson"
    export_file.write_text(exported.stdout, encoding="utf-8")

    # When it is imported into another data directory, twice
    first = _memwrite(
        "import", str(export_file), "--user", "dana", "--json", "--data-dir", str(target)
    )
    again = _here(
        "import", "-", "--user", "dana", "--json", "--data-dir", str(target), stdin=exported.stdout
    )

    # Then the second store exports the same lines, and the repeat wrote nothing
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["imported"]["memories"] == 2
    assert set(json.loads(again.stdout)["imported"].values()) == {0}
    moved = _here("export", "--user", "dana", "--data-dir", str(target))
    assert moved.stdout == exported.stdout
    # And a bad line is refused with its line number, nothing written
    bad = exported.stdout.replace('"kind":"memory"', '"kind":"spell"', 1)
    refused = _here("import", "-", "--user", "bob", "--json", "--data-dir", str(target), stdin=bad)
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["error"] == "invalid_request"


# One turn the rules store (a memory) and one they keep whole (an episode), with words only
# the episode holds ("Linear") and words only the memory holds ("Berlin").
_MEMORY_AND_EPISODE = {
    "user_id": "dana",
    "session_id": "s-1",
    "turns": [
        {"role": "user", "content": "I live in Berlin.", "timestamp": "2026-03-01T09:00:00Z"},
        {
            "role": "user",
            "content": "By the way my team is switching from Jira to Linear next month.",
            "timestamp": "2026-03-01T09:01:00Z",
        },
    ],
}


def test_ingest_lists_and_finds_both_memories_and_episodes(tmp_path: Path) -> None:
    # Given a conversation with one memory and one episode
    path = tmp_path / "talk.json"
    path.write_text(json.dumps(_MEMORY_AND_EPISODE), encoding="utf-8")
    queries = ("--query", "which tools is the team switching to?", "--query", "Berlin")

    # When it is ingested with a query that finds the episode and one that finds the memory
    printed = _memwrite("ingest", str(path), *queries)
    as_json = _ingest_json(str(path), *queries)

    # Then the text lists the kept episode and prints both kinds of hit, each with its kind
    assert printed.returncode == 0, printed.stderr
    assert "Traceback" not in printed.stderr
    episodes_section = printed.stdout.split("\nepisodes")[1]
    assert "pending" in episodes_section and "switching from Jira to Linear" in episodes_section
    hits = [line.split() for line in printed.stdout.splitlines() if line.startswith("  0.")]
    assert {hit[1] for hit in hits} == {"memory", "episode"}
    # And the JSON lists the episode it kept beside the memory
    assert [m["value"] for m in as_json["memories"]] == ["Berlin"]
    [episode] = as_json["episodes"]
    assert (episode["status"], episode["deferred_reason"]["type"]) == ("pending", "DeferredNoLLM")
    assert "Linear" in episode["text"]
    # And each query's results say their kind, with the fields of that kind
    tools, berlin = (q["results"] for q in as_json["queries"])
    assert tools[0]["kind"] == "episode" and tools[0]["turn_id"] == episode["turn_id"]
    assert berlin[0]["kind"] == "memory" and berlin[0]["value"] == "Berlin"
    # And no hit has a score of 0 (nothing that matched only by chance fills the list)
    assert all(hit["score"] > 0 for q in as_json["queries"] for hit in q["results"])


def test_search_prints_memories_and_episodes_from_serve(tmp_path: Path) -> None:
    # Given `memwrite serve` that has run a conversation with one memory and one episode
    with running_serve(tmp_path / "data") as server:
        posted = _call(server.base_url, "POST", "/v1/turns", _MEMORY_AND_EPISODE)
        path = f"/v1/traces/{posted['trace_id']}"
        deadline = time.monotonic() + TIMEOUT_SECS
        while _call(server.base_url, "GET", path)["status"] != "complete":
            assert time.monotonic() < deadline
            time.sleep(0.1)

        # When `memwrite search` asks for each, as text and as JSON
        def search(
            query: str, *extra: str, run: Runner = _memwrite
        ) -> subprocess.CompletedProcess[str]:
            return run("search", query, "--user", "dana", "--url", server.base_url, *extra)

        episode_text, memory_text = search("Jira to Linear"), search("Berlin", run=_here)
        episode_json = json.loads(search("Jira to Linear", "--json", run=_here).stdout)["results"]
        memory_json = json.loads(search("Berlin", "--json", run=_here).stdout)["results"]

    # Then each prints without failing, its kind first
    assert episode_text.returncode == memory_text.returncode == 0, episode_text.stderr
    assert episode_text.stdout.split()[1:3] == ["episode", posted["turn_ids"][1][:8]]
    assert episode_text.stdout.splitlines()[0].endswith("pending")
    assert memory_text.stdout.split()[1] == "memory"
    # And the JSON is the API's: an episode with its turn and status, a memory with its triple
    assert (episode_json[0]["kind"], episode_json[0]["status"]) == ("episode", "pending")
    assert (memory_json[0]["kind"], memory_json[0]["value"]) == ("memory", "Berlin")


def test_import_refuses_a_line_over_the_limit_at_once(tmp_path: Path) -> None:
    # Given an export whose second line is 10 MB (ten times the documented 1 MiB line limit)
    header = {"kind": "header", "format": "memwrite.export.v1", "tenant": "local", "user_id": "d"}
    big = tmp_path / "big.ndjson"
    big.write_text(
        json.dumps(header) + "\n" + '{"kind": "episode", "x": "' + "a" * 10_000_000 + '"}\n',
        encoding="utf-8",
    )
    # When it is imported
    imported = _here(
        "import", str(big), "--user", "d", "--json", "--data-dir", str(tmp_path / "data")
    )
    # Then the line is refused, named, before anything is parsed or written
    assert imported.returncode == 1, imported.stderr
    refused = json.loads(imported.stdout)
    assert (refused["error"], refused["line"]) == ("invalid_request", 2)
    assert "over 1048576 bytes" in refused["message"]
