"""Excluded means never kept, measured: with `exclude_topics: ["health"]` and no model, health
statements phrased many ways (conditions, medication, therapy, injuries, appointments) and
statements that merely sound close (a gym membership, a pharmacy as a workplace) go through the
real ingest API and pipeline (SQLite), one user each; a statement counts as stored when any of
its words survive anywhere (an episode, a memory, a session-log entry, a trace input, an index
document: the SQLite file holds them all) or the user has a memory.

`topic_statements.jsonl` holds our own statements and references to real ones in ../shared/data
(CRI persona-1 message ids, LoCoMo dia ids; never their text), each `tune` (the vocabulary was
written against them) or `held` (kept out of tuning). Goals on the held-out ones: at most 1 in
10 health statements stored in any form, at least 9 in 10 close-sounding ones kept.
"""

from __future__ import annotations

import json
import re
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from memwrite.adapters.sqlite.database import DATABASE_FILE
from memwrite_local.runtime.embedded import LocalSqlite
from memwrite_local.runtime.runner import LocalRunner
from tests.datasets import CRI_PERSONA, LOCOMO_DEV, load_cri_messages, load_locomo

STATEMENTS = Path(__file__).with_name("topic_statements.jsonl")
MAX_HEALTH_STORED = 0.10
MIN_CLOSE_KEPT = 0.90
SETTINGS = {"extraction": {"exclude_topics": ["health"]}}
_TABLES = "SELECT name FROM sqlite_master WHERE type = 'table'"
# A sentence of the statement this long found anywhere in the database counts as stored.
_FRAGMENT_CHARS = 12


def _statements() -> list[dict[str, Any]]:
    cri = {m["message_id"]: str(m["content"]) for m in load_cri_messages()}
    locomo = {(t.conversation, t.dia_id): t.text for t in load_locomo()}
    rows = [json.loads(line) for line in STATEMENTS.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        if row.get("source") == "cri":
            row["text"] = cri[row["message_id"]]
        elif row.get("source") == "locomo":
            row["text"] = locomo[(row["conversation"], row["dia_id"])]
    return rows


def _stored_text(data_dir: Path) -> str:
    with closing(sqlite3.connect(data_dir / DATABASE_FILE)) as database:
        tables = [name for (name,) in database.execute(_TABLES)]
        return json.dumps(
            {table: database.execute(f"SELECT * FROM {table}").fetchall() for table in tables},
            ensure_ascii=False,
        )


@pytest.mark.skipif(
    not (CRI_PERSONA.exists() and LOCOMO_DEV.exists()), reason="../shared/data not found"
)
def test_health_is_stored_in_no_form_and_close_statements_are_kept(tmp_path: Path) -> None:
    # Given a tenant that excludes health, offline, and every statement as one user's turn
    rows = _statements()
    with LocalSqlite(tmp_path / "data"):
        runner = LocalRunner()
        assert runner.call("PUT", "/v1/settings", SETTINGS).status == 200
        # When each is sent through the ingest API and the pipeline
        for index, row in enumerate(rows):
            turn = {"role": "user", "content": row["text"]}
            body = {"session_id": "s-1", "user_id": f"u-{index}", "turns": [turn]}
            answer = runner.call("POST", "/v1/turns", body)
            assert answer.status == 202, answer.body
            row["accepted"] = answer.body["accepted"]
        assert runner.drain().failed == {}
        stored = _stored_text(tmp_path / "data")
        for index, row in enumerate(rows):
            memories = runner.call("GET", f"/v1/users/u-{index}/memories").body["memories"]
            episodes = runner.call("GET", f"/v1/users/u-{index}/episodes").body["episodes"]
            row["stored"] = bool(memories or episodes) or any(
                json.dumps(part.strip(), ensure_ascii=False)[1:-1] in stored
                for part in re.split(r"[.!?]", row["text"])
                if len(part.strip()) >= _FRAGMENT_CHARS
            )
    # Then, per split, few health statements are stored and most close ones are kept
    report = {}
    for split in ("tune", "held"):
        health = [r for r in rows if r["split"] == split and r["label"] == "health"]
        close = [r for r in rows if r["split"] == split and r["label"] == "close"]
        caught = sum(not r["stored"] for r in health)
        kept = sum(r["stored"] or not r["accepted"] for r in close)
        report[split] = (caught, len(health), kept, len(close))
        print(
            f"\n{split}: health caught {caught}/{len(health)}, stored "
            f"{len(health) - caught}/{len(health)}; close kept {kept}/{len(close)}"
        )
        for row in health:
            if row["stored"]:
                print(f"  health stored: {row['text'][:100]!r}")
        for row in close:
            if not row["stored"] and row["accepted"]:
                print(f"  close dropped: {row['text'][:100]!r}")
    caught, health_total, kept, close_total = report["held"]
    assert (health_total - caught) / health_total <= MAX_HEALTH_STORED
    assert kept / close_total >= MIN_CLOSE_KEPT
