"""`memwrite usage`: what a tenant used, read from the data directory `memwrite serve` keeps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memwrite_local.cli import main

CONVERSATION = Path(__file__).resolve().parents[2] / "events" / "conversations" / "onboarding.json"


def _usage(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["usage", *args])
    return code, capsys.readouterr().out


def test_usage_counts_the_turns_an_ingest_wrote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a conversation ingested into a data directory, with no model
    data = str(tmp_path / "data")
    assert main(["ingest", str(CONVERSATION), "--data-dir", data, "--json"]) == 0
    ingested = json.loads(capsys.readouterr().out)
    sent = len(json.loads(CONVERSATION.read_text(encoding="utf-8"))["turns"])

    # When the tenant's usage is asked for, as JSON and as a table
    code, out = _usage(capsys, "--data-dir", data, "--json")
    table_code, table = _usage(capsys, "--data-dir", data)

    # Then every turn sent is counted, the kept ones apart, and no model was called or paid
    assert code == 0 and table_code == 0
    report = json.loads(out)
    assert report["tenant"] == "local"
    assert report["turns_in"] == sent
    dropped_at_pre_filter = sum(ingested["funnel"]["dropped"]["pre_filter"].values())
    assert 0 < report["turns_kept"] == sent - dropped_at_pre_filter < sent
    assert report["model_calls"] == 0 and report["cost_usd"] == 0.0
    assert report["embeddings"] > 0
    # And the table says the same
    assert f"turns in {sent:>40}".split() == table.splitlines()[1].split()


def test_usage_names_the_field_of_a_bad_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a data directory / When a range's start is no date
    code, out = _usage(capsys, "--data-dir", str(tmp_path / "data"), "--from", "last tuesday")

    # Then the API's 400 is printed, naming `from`, and the exit status says it failed
    assert code == 1
    error = json.loads(out)
    assert error["status"] == 400
    assert [e["field"] for e in error["error"]["errors"]] == ["from"]
