"""Search quality and read-your-writes (`make bench`, or alone:
`python -m tests.benchmarks.search_bench`).

- recall@3 and @5 of hybrid search on the hand-made paraphrase set (`tests/paraphrase_set.py`),
  WordLlama and hashing, with and without HyPE question vectors (template questions);
- read-your-writes in the local runner: from the 202 of `POST /v1/turns` to the memory being
  BM25-searchable (its text indexed) and vector-searchable (its vectors indexed), per memory,
  over `RUNS` fresh runs of a sample conversation. The runner is synchronous, so the delay is
  the pipeline's and the consumer's own processing time (embedded SQLite), with no queue or stream
  latency: AWS adds SQS, Step Functions and DynamoDB Streams delivery on top.
"""

from __future__ import annotations

import json
import statistics
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memwrite.embedder import HashingEmbedder
from tests.paraphrase_set import QUERIES, recall_at

ROOT = Path(__file__).resolve().parents[2]
CONVERSATION = ROOT / "events" / "conversations" / "moving.json"
RUNS = 5


def read_your_writes() -> dict[str, Any]:
    from memwrite_local.runtime.backend import LOCAL_API_KEY, LOCAL_TENANT
    from memwrite_local.runtime.embedded import LocalSqlite
    from memwrite_local.runtime.runner import LocalRunner

    conversation = json.loads(CONVERSATION.read_text(encoding="utf-8"))
    to_text: list[float] = []
    to_vectors: list[float] = []
    for _ in range(RUNS):
        own_key = {"MEMWRITE_API_KEYS": f"{LOCAL_API_KEY}={LOCAL_TENANT}"}
        with tempfile.TemporaryDirectory() as data_dir, LocalSqlite(Path(data_dir), own_key):
            runner = LocalRunner()
            response = runner.call("POST", "/v1/turns", conversation)
            accepted = datetime.now(UTC)
            assert response.status == 202, response.body
            report = runner.drain()
        for change in report.indexed:
            if change.text_indexed_at is not None:
                to_text.append((change.text_indexed_at - accepted).total_seconds() * 1000)
            if change.vectors_indexed_at is not None:
                to_vectors.append((change.vectors_indexed_at - accepted).total_seconds() * 1000)
    return {
        "conversation": CONVERSATION.name,
        "runs": RUNS,
        "memories_indexed": len(to_text),
        "ms_from_202_to_bm25_searchable": {
            "median": round(statistics.median(to_text), 1),
            "max": round(max(to_text), 1),
        },
        "ms_from_202_to_vector_searchable": {
            "median": round(statistics.median(to_vectors), 1),
            "max": round(max(to_vectors), 1),
        },
    }


def run() -> dict[str, Any]:
    return {
        # The embedded default (WordLlama) beside the hashing embedder it replaced.
        "paraphrase_recall": {
            "queries": len(QUERIES),
            **{
                f"{name}_at_{k}": {
                    "without_question_vectors": round(
                        recall_at(k, with_questions=False, embedder=embedder), 3
                    ),
                    "with_question_vectors": round(
                        recall_at(k, with_questions=True, embedder=embedder), 3
                    ),
                }
                for name, embedder in (("wordllama", None), ("hashing", HashingEmbedder()))
                for k in (3, 5)
            },
        },
        "read_your_writes": read_your_writes(),
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
