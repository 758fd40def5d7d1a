"""The search index's deploy-time step (`functions/index_setup`, a CloudFormation custom
resource) against a local fake OpenSearch: what it sends on Create, Update and Delete."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import functions.index_setup.handler as index_setup
from memwrite.config.settings import SearchConfig
from memwrite.errors import IndexUnavailable
from memwrite.schema import TABLES
from memwrite_local.runtime.runner import LocalContext
from tests.fake_opensearch import FakeOpenSearch, serving


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenSearch]:
    """The fake as the collection endpoint, in the environment the stack gives the function."""
    with serving(monkeypatch) as server:
        for table in TABLES:
            monkeypatch.setenv(f"{table.logical_name.upper()}_TABLE", f"t-{table.logical_name}")
        monkeypatch.setenv("OPENSEARCH_ENDPOINT", server.url)
        monkeypatch.setenv("OPENSEARCH_INDEX", "memories")
        monkeypatch.setenv("OPENSEARCH_SERVICE", "aoss")
        monkeypatch.delenv("MEMWRITE_CONFIG", raising=False)
        yield server


def request(kind: str, **extra: Any) -> dict[str, Any]:
    return {"RequestType": kind, "ResourceProperties": {"index": "memories"}, **extra}


def test_create_puts_the_hybrid_pipeline_and_the_index_the_adapter_queries(
    fake: FakeOpenSearch,
) -> None:
    fake.replies[("HEAD", "/memories")] = (404, {})
    # When CloudFormation creates the resource
    response = index_setup.on_event(request("Create"), LocalContext())
    # Then the pipeline the hybrid query names and the index with its kNN mapping exist
    pipeline, exists, create = fake.requests
    assert (pipeline.method, pipeline.path) == ("PUT", "/_search/pipeline/memories-hybrid")
    assert (exists.method, exists.path) == ("HEAD", "/memories")
    assert (create.method, create.path.split("?")[0]) == ("PUT", "/memories")
    vector = json.loads(create.body)["mappings"]["properties"]["content_vector"]
    assert vector["dimension"] == SearchConfig().dimension  # the configured embedder's
    assert response["PhysicalResourceId"] == "memories"
    assert "aoss" in pipeline.headers["Authorization"]


def test_update_is_idempotent_and_keeps_the_existing_index(fake: FakeOpenSearch) -> None:
    # Given the index exists (the fake answers HEAD with 200)
    index_setup.on_event(request("Update", PhysicalResourceId="memories"), LocalContext())
    # Then the pipeline is put again and the index is not recreated: only fields it lacks
    # are added (the mapping put is additive)
    assert [(r.method, r.path.split("?")[0]) for r in fake.requests] == [
        ("PUT", "/_search/pipeline/memories-hybrid"),
        ("HEAD", "/memories"),
        ("PUT", "/memories/_mapping"),
    ]


def test_delete_leaves_the_index_and_its_documents(fake: FakeOpenSearch) -> None:
    response = index_setup.on_event(
        request("Delete", PhysicalResourceId="memories"), LocalContext()
    )
    assert response == {"PhysicalResourceId": "memories"}
    assert fake.requests == []


def test_a_refusal_is_retried_then_fails_the_deploy(
    fake: FakeOpenSearch, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a collection whose data access policy has not applied yet
    monkeypatch.setattr(index_setup, "RETRY_SECS", 0.0)
    fake.replies[("PUT", "/_search/pipeline")] = (403, {"message": "forbidden"})
    with pytest.raises(IndexUnavailable):
        index_setup.on_event(request("Create"), LocalContext())
    assert len(fake.requests) == index_setup.ATTEMPTS
