"""Export and import through the real handlers, on both backends (moto and the embedded
SQLite): export -> erase -> import gives back the same store and the same export, a repeated
import changes nothing, and bad input is a 400 naming the line and the field, with nothing
written. An export over one response's limit goes to the exports bucket (moto's S3) and is
answered 303 with a presigned URL to the same bytes; without a bucket it stays inline."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
import requests

import functions.api.handler as api_handler
from memwrite.portability import delivery
from memwrite.records.episode import EpisodeStatus
from tests.integration.conftest import Local, MakeLocal
from tests.reliability.final_state import FinalState, final_state

USER = "dana"
BUCKET = "memwrite-exports-test"
NDJSON = {"Content-Type": "application/x-ndjson"}
TURNS = [
    {"role": "user", "content": "I live in Berlin.", "timestamp": "2025-01-05T10:00:00Z"},
    {
        "role": "user",
        "content": "My sister Priya works at SAP.",
        "timestamp": "2025-01-05T10:01:00Z",
    },
    {"role": "user", "content": "I am allergic to peanuts.", "timestamp": "2025-01-05T10:02:00Z"},
    {"role": "user", "content": "I moved to Lisbon.", "timestamp": "2025-06-01T09:00:00Z"},
]
# Beyond the rules offline (no model here): each is kept whole as a pending episode.
EPISODE_TURNS = [
    {
        "role": "user",
        "content": "We packed everything up and settled in Porto this May, Lisbon got too pricey.",
        "timestamp": "2025-06-02T09:00:00Z",
    },
    {
        "role": "user",
        "content": "Since last month cilantro has been ruining every dish for me, sadly.",
        "timestamp": "2025-06-03T09:00:00Z",
    },
]


@pytest.fixture(params=["moto", "sqlite"])
def local(make_local: MakeLocal, request: pytest.FixtureRequest) -> Local:
    return make_local(backend=str(request.param))


def ingest(local: Local, turns: list[dict[str, Any]], user: str = USER) -> None:
    body = {"session_id": "s-1", "user_id": user, "turns": turns}
    assert local.post_turns(body).status == 202
    report = local.runner.drain()
    assert report.failed == {} and report.index_failed == {}


def export(local: Local, user: str = USER) -> str:
    result = local.runner.call("GET", f"/v1/users/{user}/export")
    assert result.status == 200, result.body
    assert result.headers["Content-Type"] == "application/x-ndjson"
    return result.text


def import_(local: Local, text: str, user: str = USER) -> Any:
    return local.runner.call("POST", f"/v1/users/{user}/import", text, headers=NDJSON)


def user_tables(state: FinalState) -> FinalState:
    """The tables an export holds (and the retrieval counters, and the search index)."""
    kept = {"memories", "entity_facts", "entities", "memory_access", "episodes"}
    tables = {name: rows for name, rows in state.items() if name in kept}
    for name, rows in state.items():
        if name.startswith("index."):
            # A user's partition (slot) is numbered by the index itself: a user indexed anew
            # gets a new number, the same documents.
            tables[name] = sorted(json.dumps(_without_slot(json.loads(row))) for row in rows)
    if "turns" in state:  # DynamoDB: the counters and the episodes live in the turns table
        tables["access"] = [row for row in state["turns"] if '"ACCESS#' in row]
        tables["episodes"] = [row for row in state["turns"] if '"EPISODE#' in row]
    return tables


def _without_slot(row: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in row.items() if key != "slot"}


def keep_episodes(local: Local) -> None:
    """Two pending episodes, then one of them extracted by a backfill (every field set)."""
    ingest(local, EPISODE_TURNS)
    episodes = api_handler.deps().query.episodes
    assert episodes is not None
    page = episodes.episodes_of(
        local.tenant, USER, status=None, since=None, until=None, limit=10, cursor=None, now=0
    )
    assert [e.status for e in page.episodes] == [EpisodeStatus.PENDING] * 2
    memory_id = local.memories(USER)[0].memory_id
    done = page.episodes[0].model_copy(
        update={
            "status": EpisodeStatus.EXTRACTED,
            "memory_ids": [memory_id],
            "outcome": "Superseded",
            "backfill_trace_id": "t-backfill",
        }
    )
    episodes.update_episodes([done])


def test_export_erase_import_round_trips_exactly(local: Local) -> None:
    # Given a user with a supersession chain, an entity with an alias, retrievals and episodes
    ingest(local, TURNS)
    keep_episodes(local)
    ingest(local, [TURNS[2]], user="someone-else")
    found = local.runner.call("POST", "/v1/search", {"user_id": USER, "query": "peanuts"})
    assert found.status == 200 and found.body["results"]
    # The retrieval counters are written on the api handler's background thread: settled.
    api_handler.ACCESS_UPDATES.submit(lambda: None).result()
    before = user_tables(final_state(local))
    indexed = [row for name, rows in before.items() if name.startswith("index.") for row in rows]
    assert sum('"episode:' in row for row in indexed) == 2, "both episodes are in the index"
    exported = export(local)
    lines = [json.loads(line) for line in exported.splitlines()]
    assert lines[0] == {
        "kind": "header",
        "format": "memwrite.export.v1",
        "tenant": local.tenant,
        "user_id": USER,
    }
    kinds = {line["kind"] for line in lines}
    assert kinds == {"header", "entity", "entity_fact", "memory", "episode"}
    episode_lines = [line for line in lines if line["kind"] == "episode"]
    assert lines[-len(episode_lines) :] == episode_lines, "episodes last"
    turn_ids = [line["episode"]["turn"]["turn_id"] for line in episode_lines]
    assert len(turn_ids) == 2 and turn_ids == sorted(turn_ids)
    assert {line["episode"]["status"] for line in episode_lines} == {"pending", "extracted"}
    assert any(line.get("access_count") for line in lines if line["kind"] == "memory")
    superseded = [m for m in lines if m["kind"] == "memory" and m["memory"]["superseded_by"]]
    assert superseded, "the Berlin -> Lisbon chain is in the export"

    # When the user is erased, then the export imported
    assert local.runner.call("DELETE", f"/v1/users/{USER}/memories").status == 200
    assert export(local).count("\n") == 1  # the header only
    imported = import_(local, exported)
    report = local.runner.drain()

    # Then the store is what it was, the index included, and so is the export
    assert imported.status == 200, imported.body
    assert imported.body["imported"]["memories"] == len(lines) - 1 - sum(
        1 for line in lines if line["kind"] in {"entity", "entity_fact", "episode"}
    )
    assert imported.body["imported"]["episodes"] == 2
    assert report.index_failed == {}
    assert export(local) == exported
    assert user_tables(final_state(local)) == before
    # And the restored memories are searchable, the superseded one not
    lisbon = local.runner.call("POST", "/v1/search", {"user_id": USER, "query": "Lisbon"})
    assert [hit["text"] for hit in lisbon.body["results"]][:1] == ["The user lives in Lisbon."]
    berlin = local.runner.call("POST", "/v1/search", {"user_id": USER, "query": "Berlin"})
    assert "The user lives in Berlin." not in [hit["text"] for hit in berlin.body["results"]]
    # And the episodes are listed again, as they were
    listed = local.runner.call("GET", f"/v1/users/{USER}/episodes")
    assert listed.status == 200
    assert sorted(e["turn_id"] for e in listed.body["episodes"]) == turn_ids

    # And importing it again changes nothing
    api_handler.ACCESS_UPDATES.submit(lambda: None).result()
    state = final_state(local)
    again = import_(local, exported)
    assert again.status == 200
    assert set(again.body["imported"].values()) == {0}
    assert again.body["unchanged"]["episodes"] == 2
    assert final_state(local) == state


def _replace_line(text: str, index: int, line: dict[str, Any] | str) -> str:
    lines = text.splitlines()
    lines[index] = line if isinstance(line, str) else json.dumps(line)
    return "\n".join(lines) + "\n"


def test_bad_input_is_a_400_naming_line_and_field_and_writes_nothing(local: Local) -> None:
    # Given an export of a user with episodes, then the user erased
    ingest(local, TURNS)
    ingest(local, EPISODE_TURNS)
    exported = export(local)
    lines = [json.loads(line) for line in exported.splitlines()]
    memory_at = next(i for i, line in enumerate(lines) if line["kind"] == "memory")
    chained = next(
        i
        for i, line in enumerate(lines)
        if line["kind"] == "memory" and line["memory"]["superseded_by"]
    )
    local.runner.call("DELETE", f"/v1/users/{USER}/memories")
    empty = final_state(local)

    bad_confidence = json.loads(json.dumps(lines[memory_at]))
    bad_confidence["memory"]["confidence"] = "very"
    broken_chain = json.loads(json.dumps(lines[chained]))
    broken_chain["memory"]["superseded_by"] = "0" * 32
    other_user = json.loads(json.dumps(lines[memory_at]))
    other_user["memory"]["user_id"] = "mallory"
    episode_at = next(i for i, line in enumerate(lines) if line["kind"] == "episode")
    bad_status = json.loads(json.dumps(lines[episode_at]))
    bad_status["episode"]["status"] = "forgotten"
    other_episode_user = json.loads(json.dumps(lines[episode_at]))
    other_episode_user["episode"]["turn"]["user_id"] = "mallory"
    twice = exported.splitlines()[episode_at]
    cases = [
        (_replace_line(exported, memory_at, "{not json"), memory_at + 1, "line"),
        (_replace_line(exported, memory_at, bad_confidence), memory_at + 1, "memory.confidence"),
        (_replace_line(exported, memory_at, {"kind": "spell"}), memory_at + 1, "kind"),
        (_replace_line(exported, chained, broken_chain), chained + 1, "memory.superseded_by"),
        (_replace_line(exported, memory_at, other_user), memory_at + 1, "memory.user_id"),
        ("\n".join(exported.splitlines()[1:]) + "\n", 1, "kind"),  # no header
        (exported + exported.splitlines()[memory_at] + "\n", len(lines) + 1, "memory.memory_id"),
        ("", 1, "line"),
        (_replace_line(exported, episode_at, bad_status), episode_at + 1, "episode.status"),
        (
            _replace_line(exported, episode_at, other_episode_user),
            episode_at + 1,
            "episode.turn.user_id",
        ),
        (exported + twice + "\n", len(lines) + 1, "episode.turn.turn_id"),
    ]
    for body, line, field in cases:
        # When the import is sent
        result = import_(local, body)
        # Then a 400 names the line and the field, and nothing was written
        assert result.status == 400, (field, result.body)
        assert (result.body["line"], result.body["errors"][0]["field"]) == (line, field)
        assert final_state(local) == empty, field
    # And a body of another media type is a 415
    wrong = local.runner.call("POST", f"/v1/users/{USER}/import", exported)
    assert wrong.status == 415
    # And another user's export goes to nobody else
    to_other = import_(local, exported, user="someone-else")
    assert (to_other.status, to_other.body["errors"][0]["field"]) == (400, "header.user_id")


def test_import_over_a_changed_episode_is_a_409_and_writes_nothing(local: Local) -> None:
    # Given an export with episodes, then one of them changed in the store (a backfill ran)
    ingest(local, EPISODE_TURNS)
    exported = export(local)
    lines = [json.loads(line) for line in exported.splitlines()]
    episodes = api_handler.deps().query.episodes
    assert episodes is not None
    first = lines[1]["episode"]["turn"]["turn_id"]
    stored = episodes.get_episodes(local.tenant, USER, [first])[first]
    episodes.update_episodes([stored.model_copy(update={"outcome": "NothingToKeep"})])
    state = final_state(local)

    # When the export is imported
    result = import_(local, exported)

    # Then it is refused, naming the episode's line, and nothing changed
    assert result.status == 409, result.body
    assert (result.body["line"], result.body["item_id"]) == (2, first)
    assert final_state(local) == state


def test_import_over_a_changed_store_is_a_409_and_writes_nothing(local: Local) -> None:
    # Given an export, then a new move over the exported chain (the same fact row changes)
    ingest(local, TURNS[:1])
    exported = export(local)
    local.runner.call("DELETE", f"/v1/users/{USER}/memories")
    ingest(
        local,
        [{"role": "user", "content": "I live in Paris.", "timestamp": "2025-02-01T09:00:00Z"}],
    )
    state = final_state(local)

    # When the old export is imported
    result = import_(local, exported)

    # Then it is refused, naming the line, and nothing changed
    assert result.status == 409, result.body
    assert result.body["error"] == "import_conflict"
    assert final_state(local) == state


def fetch_spilled(result: Any) -> bytes:
    """The export a 303 points at, fetched from its presigned URL (moto answers S3's HTTP)."""
    assert result.status == 303, result.body
    location = result.headers["Location"]
    assert result.body["url"] == location and result.body["expires_in"] == 15 * 60
    fetched = requests.get(location, timeout=5)
    assert fetched.status_code == 200
    assert fetched.headers["Content-Type"] == "application/x-ndjson"
    assert result.body["bytes"] == len(fetched.content)
    return fetched.content


def test_an_export_over_the_inline_limit_is_answered_303_with_the_same_bytes(
    make_local: MakeLocal, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an exports bucket (on AWS: the api function's EXPORTS_BUCKET) and a user
    local = make_local(env={"EXPORTS_BUCKET": BUCKET})
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    ingest(local, TURNS)
    ingest(local, EPISODE_TURNS)
    inline = export(local)
    # When the inline limit is its raw size: the escaped body of a Lambda answer is larger
    monkeypatch.setattr(delivery, "INLINE_EXPORT_LIMIT", len(inline.encode()))
    spilled = local.runner.call("GET", f"/v1/users/{USER}/export")

    # Then the answer is a 303 to exactly the bytes the inline export gave
    assert fetch_spilled(spilled) == inline.encode()
    # And the object is the user's, encrypted, under the key prefix the function may write
    [stored] = s3.list_objects_v2(Bucket=BUCKET)["Contents"]
    assert stored["Key"].startswith(f"exports/{local.tenant}/{USER}/")
    head = s3.head_object(Bucket=BUCKET, Key=stored["Key"])
    assert head["ServerSideEncryption"] == "AES256"

    # And export -> erase -> import of the fetched bytes gives back the same export
    assert local.runner.call("DELETE", f"/v1/users/{USER}/memories").status == 200
    imported = import_(local, inline)
    assert imported.status == 200, imported.body
    assert local.runner.drain().index_failed == {}
    again = local.runner.call("GET", f"/v1/users/{USER}/export")
    assert fetch_spilled(again) == inline.encode()


def test_an_export_is_inline_without_a_bucket_whatever_its_size(
    local: Local, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given no exports bucket (`memwrite serve`, local runs) and a tiny inline limit
    ingest(local, TURNS)
    inline = export(local)
    monkeypatch.setattr(delivery, "INLINE_EXPORT_LIMIT", 10)
    # When the user is exported, then the answer is the same JSON lines, inline
    assert export(local) == inline


def test_an_export_s3_refuses_is_a_503_and_changes_nothing(
    make_local: MakeLocal, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an exports bucket S3 does not have (a put fails) and an export over the limit
    local = make_local(env={"EXPORTS_BUCKET": BUCKET})
    ingest(local, TURNS)
    monkeypatch.setattr(delivery, "INLINE_EXPORT_LIMIT", 10)
    state = final_state(local)

    # When the user is exported
    result = local.runner.call("GET", f"/v1/users/{USER}/export")

    # Then a retryable 503, not a cut export, and nothing changed
    assert result.status == 503, result.body
    assert (result.body["error"], result.headers["Retry-After"]) == ("unavailable", "2")
    assert final_state(local) == state
    assert boto3.client("s3").list_buckets()["Buckets"] == []
