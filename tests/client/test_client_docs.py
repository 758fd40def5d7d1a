"""docs/client.md names every public method of both clients: a method added to a client and not
to its documentation fails here."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from memwrite.client import AsyncMemwriteClient, MemwriteClient

DOCS = Path(__file__).resolve().parents[2] / "docs" / "client.md"


def public_methods(client: type) -> list[str]:
    return sorted(
        name
        for name, member in inspect.getmembers(client, inspect.isfunction)
        if not name.startswith("_")
    )


@pytest.mark.parametrize("client", [MemwriteClient, AsyncMemwriteClient])
def test_docs_name_every_public_method_of_the_client(client: type) -> None:
    # Given the client's public methods, and the documentation
    methods = public_methods(client)
    assert "add" in methods and "search" in methods
    text = DOCS.read_text(encoding="utf-8")
    # Then each is written as a call in code, `name(`
    missing = [name for name in methods if not re.search(rf"`{re.escape(name)}\(", text)]
    assert missing == [], f"docs/client.md does not document {missing}"
