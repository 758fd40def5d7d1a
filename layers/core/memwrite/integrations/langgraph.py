"""`MemwriteStore`: memwrite as a LangGraph store (`langgraph.store.base.BaseStore`), so a graph
compiled with `store=MemwriteStore(url, api_key)` keeps its long-term memory in memwrite.

The mapping (docs/integrations/langgraph.md has the table):

- **namespace**: its first element is the user id; the rest names nothing in memwrite (a user's
  memories are one set), so `("dana", "a")` and `("dana", "b")` reach the same memories.
  Items come back under the namespace the call gave.
- **key**: the memory's attribute (its predicate), normalised to snake_case (`"k1"`,
  `"favourite_food"`; a key starting with a digit gets `k_` in front, other characters
  become `_`). So `get(("dana",), "lives_in")` also reads what the pipeline learnt from
  conversations.
- **put**: a direct memory (`POST /v1/users/{user_id}/memories`): type `value["type"]`
  (default `fact`), the attribute of the key, `value["text"]` as its text and value. An
  attribute memwrite does not know is single-valued: a later put of the key supersedes the
  earlier one (a known many-valued one, such as `likes`, keeps both; `get` returns the
  newest). `ttl` (minutes) becomes the memory's `expires_at`. It waits for the pipeline (up
  to `wait_secs`), so a search right after finds it. `value=None` deletes.
- **get**: the user's current memory (not superseded) of that attribute about the user.
- **search**: `query` is memwrite's hybrid search (memories only); no query lists the user's
  current memories. `filter` matches the returned values' fields exactly.
- **delete**: every memory of the user with that attribute (`DELETE /v1/memories/{id}`), the
  superseded ones too, so the key is gone rather than its previous value coming back.
- **list_namespaces**: memwrite lists no users (every read is per user), so only a condition
  naming the user (`prefix=("dana",)`) is answered: `[("dana",)]` when the user has memories.

What does not map: other fields of `value` than `text` and `type` are not stored; `index`
(memwrite indexes every memory's text and HyPE questions itself); `refresh_ttl`. `get` and
`delete` read the user's memory list (one request per 100 memories). `abatch` runs `batch` in
a worker thread.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from memwrite.client import Memory, MemwriteClient, NotFound, SearchHit, TraceNotFinished

__all__ = ["MemwriteStore", "attribute_of"]

USER_ENTITY = "user"
DEFAULT_TYPE = "fact"
MAX_VALUE_CHARS = 500  # a direct memory's value; its text may be longer
_NOT_SNAKE = re.compile(r"[^a-z0-9_]+")


def attribute_of(key: str) -> str:
    """The memory attribute a store key names (snake_case, starting with a letter)."""
    attribute = _NOT_SNAKE.sub("_", key.strip().lower()).strip("_") or "key"
    return attribute if attribute[0].isalpha() else f"k_{attribute}"


def _value_of(memory: Memory | SearchHit) -> dict[str, Any]:
    return {
        "text": memory.text,
        "memory_id": memory.memory_id,
        "type": memory.type,
        "confidence": memory.confidence,
    }


class MemwriteStore(BaseStore):
    """A LangGraph store on a memwrite API: `MemwriteStore("http://127.0.0.1:8080", key)`.

    `api_key` defaults to `MEMWRITE_API_KEY`; `client` replaces the HTTP client (tests)."""

    supports_ttl = True

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        *,
        wait_secs: float = 30.0,
        client: MemwriteClient | None = None,
    ) -> None:
        self.client = client or MemwriteClient(url, api_key=api_key)
        self.wait_secs = wait_secs

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self._one(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    def _one(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(op)
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, PutOp):
            self._put(op)
            return None
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise TypeError(f"unknown store operation {type(op).__name__}")

    @staticmethod
    def _user(namespace: tuple[str, ...]) -> str:
        if not namespace:
            raise ValueError("the namespace's first element is the user id; it is empty")
        return namespace[0]

    def _keyed(self, user_id: str, key: str) -> list[Memory]:
        """The user's memories about the user with the key's attribute, current first."""
        attribute = attribute_of(key)
        found = [
            m
            for m in self.client.memories(user_id)
            if m.attribute == attribute and m.entity == USER_ENTITY
        ]
        return sorted(found, key=lambda m: (m.superseded_by is not None, m.observed_at))

    def _get(self, op: GetOp) -> Item | None:
        current = [m for m in self._keyed(self._user(op.namespace), op.key) if not m.superseded_by]
        if not current:
            return None
        memory = current[-1]
        return Item(
            value=_value_of(memory),
            key=memory.attribute,
            namespace=op.namespace,
            created_at=memory.observed_at,
            updated_at=memory.observed_at,
        )

    def _put(self, op: PutOp) -> None:
        user_id = self._user(op.namespace)
        if op.value is None:
            for old in self._keyed(user_id, op.key):
                try:
                    self.client.delete_memory(old.memory_id)
                except NotFound:
                    continue  # deleted meanwhile
            return
        text = op.value.get("text")
        if not isinstance(text, str) or not text.strip():
            raise ValueError('a memwrite item\'s value needs "text": the memory as a sentence')
        direct: dict[str, Any] = {
            "type": op.value.get("type", DEFAULT_TYPE),
            "attribute": attribute_of(op.key),
            "value": text.strip()[:MAX_VALUE_CHARS],
            "text": text.strip(),
        }
        if op.ttl is not None:
            direct["expires_at"] = datetime.now(UTC) + timedelta(minutes=op.ttl)
        ack = self.client.add_memories(user_id, [direct])
        try:
            self.client.wait(ack.trace_id, timeout=self.wait_secs)
        except TraceNotFinished:
            return  # stored once the pipeline catches up; a search may miss it until then

    def _search(self, op: SearchOp) -> list[SearchItem]:
        user_id = self._user(op.namespace_prefix)
        wanted = op.offset + op.limit
        found: list[tuple[dict[str, Any], str, datetime, float | None]] = []
        if op.query:
            hits = self.client.search(user_id=user_id, query=op.query, k=wanted, kinds=["memory"])
            found = [(_value_of(h), h.attribute or "", h.observed_at, h.score) for h in hits]
        else:
            for memory in self.client.memories(user_id):
                if memory.superseded_by is None:
                    found.append((_value_of(memory), memory.attribute, memory.observed_at, None))
        matching = [
            row
            for row in found
            if all(row[0].get(name) == value for name, value in (op.filter or {}).items())
        ]
        return [
            SearchItem(
                namespace=op.namespace_prefix,
                key=key,
                value=value,
                created_at=at,
                updated_at=at,
                score=score,
            )
            for value, key, at, score in matching[op.offset : wanted]
        ]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        prefixes = [c.path for c in op.match_conditions or () if c.match_type == "prefix"]
        users = {p[0] for p in prefixes if p and p[0] != "*"}
        if not users:
            raise ValueError(
                "memwrite lists no users: name one, list_namespaces(prefix=(user_id,))"
            )
        namespaces: list[tuple[str, ...]] = [
            (user_id,)
            for user_id in sorted(users)
            if next(iter(self.client.memories(user_id, page_size=1)), None) is not None
        ]
        return namespaces[op.offset : op.offset + op.limit]
