"""No request or scheduled path reads a whole DynamoDB table: every listing goes through an
index of what it lists (docs/scale.md)."""

from __future__ import annotations

import ast
from pathlib import Path

ADAPTERS = Path(__file__).resolve().parents[2] / "layers/core/memwrite/adapters/aws"
# The outbox's pending rows: only the local runner (`--backend moto`) lists them; on AWS the
# table's stream hands each row to stage 7. It scans the sparse `pending` index, not the table.
LOCAL_ONLY = {"dynamodb_outbox.py"}
# The topic sweep (a tenant newly excluding a topic): a background job of the expire function,
# once per settings change, on neither a request nor a schedule. No index lists a tenant's
# users yet, so it reads the keys of the memories and turns tables once (docs/design.md §2).
BACKGROUND_ONCE = {"dynamodb_topic_sweep.py"}


def _scans(path: Path) -> list[int]:
    tree = ast.parse(path.read_text())
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "scan"
    ]


def test_no_dynamodb_adapter_on_a_request_or_scheduled_path_scans() -> None:
    # Given every AWS adapter module
    found = {
        path.name: lines
        for path in sorted(ADAPTERS.glob("*.py"))
        if path.name not in LOCAL_ONLY | BACKGROUND_ONCE and (lines := _scans(path))
    }
    # Then none calls Scan: the backfill's users, `memwrite keys list` and the rest query
    assert found == {}
