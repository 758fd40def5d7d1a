"""The store-everything anchor of `memwrite eval`: every turn stored raw, searched with BM25.

It uses the same embedded BM25 as the pipeline's search (SQLite FTS5 of `EmbeddedIndex`, its
tokenizer and stop words), so the report compares what is stored, not how it is searched.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from memwrite.adapters.sqlite.embedded_index import EmbeddedIndex
from memwrite.claims.candidate import MemoryType, Tier
from memwrite.index import MemoryDoc

__all__ = ["RawTurnIndex"]

_TENANT = "eval-baseline"
_TOPIC = "raw"


class RawTurnIndex:
    """Raw turns of one user, BM25-searchable; a hit is the ref of the turn it stores."""

    def __init__(self, user_id: str, turns: Iterable[tuple[str, str]]) -> None:
        """`turns`: (ref, text) pairs; each becomes one document."""
        self._user_id = user_id
        self._index = EmbeddedIndex()
        for ref, text in turns:
            self._index.upsert(
                MemoryDoc(
                    memory_id=ref,
                    tenant=_TENANT,
                    user_id=user_id,
                    text=text,
                    type=MemoryType.EVENT,
                    topic=_TOPIC,
                    tier=Tier.FACT,
                    confidence=1.0,
                )
            )

    def __len__(self) -> int:
        return self._index.count(_TENANT, self._user_id)

    def search(self, query: str, k: int) -> Sequence[str]:
        return [hit.memory_id for hit in self._index.bm25(_TENANT, self._user_id, query, k)]

    def close(self) -> None:
        self._index.close()
