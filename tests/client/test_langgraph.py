"""`memwrite.integrations.langgraph.MemwriteStore` inside a LangGraph graph, on a live `memwrite
serve`: the graph's nodes put, search, get and delete a user's memory through the store
LangGraph injects (no model involved: a store is the graph's, not the model's)."""

from __future__ import annotations

import uuid
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore

from memwrite.integrations.langgraph import MemwriteStore, attribute_of
from tests.client.conftest import API_KEY
from tests.serve_process import REPO_ROOT, ServeProcess


class State(TypedDict, total=False):
    user_id: str
    found: list[str]
    got: str | None
    replaced: str | None
    namespaces: list[tuple[str, ...]]
    after_get: Any
    after_search: list[str]


def put(state: State, *, store: BaseStore) -> State:
    store.put((state["user_id"],), "favourite_food", {"text": "The user loves ramen."})
    return {}


def search(state: State, *, store: BaseStore) -> State:
    items = store.search((state["user_id"],), query="ramen food")
    return {"found": [item.value["text"] for item in items]}


def get(state: State, *, store: BaseStore) -> State:
    item = store.get((state["user_id"],), "favourite_food")
    namespaces = store.list_namespaces(prefix=(state["user_id"],))
    return {"got": item.value["text"] if item else None, "namespaces": namespaces}


def replace(state: State, *, store: BaseStore) -> State:
    store.put((state["user_id"],), "favourite_food", {"text": "The user loves pho."})
    item = store.get((state["user_id"],), "favourite_food")
    return {"replaced": item.value["text"] if item else None}


def delete(state: State, *, store: BaseStore) -> State:
    store.delete((state["user_id"],), "favourite_food")
    after = store.search((state["user_id"],), query="ramen pho food")
    return {
        "after_get": store.get((state["user_id"],), "favourite_food"),
        "after_search": [item.value["text"] for item in after],
    }


def test_a_graph_compiled_with_the_store_puts_searches_gets_and_deletes(
    serve: ServeProcess,
) -> None:
    # Given a graph whose nodes use the store LangGraph hands them
    builder = StateGraph(State)
    for node in (put, search, get, replace, delete):
        builder.add_node(node.__name__, node)
    builder.add_edge(START, "put")
    for first, then in (("put", "search"), ("search", "get"), ("get", "replace")):
        builder.add_edge(first, then)
    builder.add_edge("replace", "delete")
    builder.add_edge("delete", END)
    graph = builder.compile(store=MemwriteStore(serve.base_url, API_KEY))
    dana = f"dana-{uuid.uuid4().hex[:8]}"

    # When it runs for a user
    result = graph.invoke({"user_id": dana})

    # Then the memory put was found by search and read back by its key
    assert "The user loves ramen." in result["found"]
    assert result["got"] == "The user loves ramen."
    assert result["namespaces"] == [(dana,)]
    # And a second put of the key replaced it (memwrite superseded the first)
    assert result["replaced"] == "The user loves pho."
    # And after the delete the key is gone, the earlier value not back
    assert result["after_get"] is None
    assert result["after_search"] == []


def test_the_store_refuses_what_does_not_map(serve: ServeProcess) -> None:
    store = MemwriteStore(serve.base_url, API_KEY)
    # A value without text, and listing namespaces without naming a user
    with pytest.raises(ValueError, match='needs "text"'):
        store.put(("dana",), "k1", {"note": "no text"})
    with pytest.raises(ValueError, match="lists no users"):
        store.list_namespaces()
    # And keys become attributes
    assert [attribute_of(k) for k in ("k1", "Favourite Food", "3f2a-9")] == [
        "k1",
        "favourite_food",
        "k_3f2a_9",
    ]


def test_put_then_search_as_the_contract_says(serve: ServeProcess) -> None:
    # Given the store alone, a user as the namespace's first element
    store = MemwriteStore(serve.base_url, API_KEY)
    dana = f"dana-{uuid.uuid4().hex[:8]}"
    # When an item is put under "k1", then searched for
    store.put((dana,), "k1", {"text": "The user is allergic to peanuts."})
    items = store.search((dana,), query="peanut allergy")
    # Then an item's value["text"] holds the memory, under its key
    assert [(item.key, item.value["text"]) for item in items] == [
        ("k1", "The user is allergic to peanuts.")
    ]
    assert items[0].namespace == (dana,) and items[0].score is not None


def test_the_docs_example_runs_as_written(
    serve: ServeProcess, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the example of docs/integrations/langgraph.md, pointed at this serve
    page = (REPO_ROOT / "docs" / "integrations" / "langgraph.md").read_text(encoding="utf-8")
    example = page.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.setenv("MEMWRITE_URL", serve.base_url)
    monkeypatch.setenv("MEMWRITE_API_KEY", API_KEY)
    # When it runs (for a user of its own: "dana" is the example's)
    exec(compile(example.replace('"dana"', f'"dana-{uuid.uuid4().hex[:8]}"'), "example", "exec"))
    # Then it prints what it promises
    assert capsys.readouterr().out.strip() == "The user loves ramen."
