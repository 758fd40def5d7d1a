"""The OpenAPI 3.1 document of the API, generated from the handlers' resolvers.

The pre_filter and api functions are two Powertools resolvers (two Lambdas behind one API):
each generates its own schema from its routes, models and `responses=`, and Powertools'
`OpenAPIMerge` joins them (a path and method defined twice is an error). What no resolver can
say is added here: the `x-api-key` security scheme, the one public route, and the removal of
the 422 `HTTPValidationError` Powertools declares on every validated route (our validation
errors are 400s with field errors; the only 422 is a reused `Idempotency-Key`).

`make openapi` writes `functions/openapi.json`, which the api function serves at
`GET /v1/openapi.json`; a test fails when the handlers and the committed document differ.
"""

from __future__ import annotations

import json
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from aws_lambda_powertools.event_handler.openapi.merge import OpenAPIMerge
from aws_lambda_powertools.event_handler.openapi.models import Tag

__all__ = ["DOCUMENT_PATH", "PUBLIC_PATHS", "openapi_document", "render"]

DOCUMENT_PATH = Path(__file__).resolve().parent / "openapi.json"
# Answered without a credential: API Gateway has no authorizer on them, `memwrite serve` asks
# for no key.
PUBLIC_PATHS = frozenset({"/v1/openapi.json"})
SECURITY_SCHEME = "apiKey"
_API_KEY = {
    "type": "apiKey",
    "in": "header",
    "name": "x-api-key",
    "description": "The tenant's API key (`memwrite serve`: `local-dev-key` unless configured).",
}
# Bodies a resolver cannot declare (read raw, not a pydantic model): the import's JSON lines.
_RAW_BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("/v1/users/{user_id}/import", "post"): {
        "required": True,
        "description": "An export of this user, exactly as `GET .../export` wrote it.",
        "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
    },
}
_POWERTOOLS_VALIDATION_ERROR = "#/components/schemas/HTTPValidationError"
_DESCRIPTION = """\
memwrite turns conversation turns into typed, deduplicated memories.

`POST /v1/turns` answers after the first stage (202, with a `trace_id`); the rest of the
pipeline runs asynchronously: poll `GET /v1/traces/{trace_id}` until its `status` is
`complete` or `failed`. Every request but this document's needs an `x-api-key`; the tenant is
the key's, never a field of the request.

Errors are JSON: `{"error": code, "errors": [{"field", "message"}], ...}` (or `message`);
429 and 503 carry a `Retry-After` to honour."""
_TAGS = [
    Tag(name="ingest", description="Conversation turns in."),
    Tag(name="memories", description="Search, read and erase memories."),
    Tag(name="traces", description="What each request did: follow, replay, roll back."),
    Tag(name="settings", description="The tenant's own settings: steer what is remembered."),
    Tag(name="meta", description="This document."),
]


def _api_version() -> str:
    try:
        return version("memwrite")
    except PackageNotFoundError:  # a checkout on PYTHONPATH, not installed
        return "0.0.0"


def _resolvers() -> list[Any]:
    # Imported here: generating the document is a build step, not part of a cold start.
    from functions.api.handler import app as api
    from functions.pre_filter.handler import app as pre_filter

    return [pre_filter, api]


def _check_components_agree(schemas: list[dict[str, Any]]) -> None:
    """`OpenAPIMerge` keeps the last of two components of one name: they must be equal."""
    seen: dict[str, Any] = {}
    for schema in schemas:
        for name, component in schema.get("components", {}).get("schemas", {}).items():
            if name in seen and seen[name] != component:
                raise ValueError(f"two resolvers define the component {name} differently")
            seen[name] = component


def _referenced(node: Any, found: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            found.add(ref.rsplit("/", 1)[1])
        for value in node.values():
            _referenced(value, found)
    elif isinstance(node, list):
        for value in node:
            _referenced(value, found)


def _prune_components(document: dict[str, Any]) -> None:
    """Drop the schemas nothing reaches from the paths (Powertools' own error models)."""
    schemas = document["components"]["schemas"]
    reachable: set[str] = set()
    _referenced(document["paths"], reachable)
    frontier = set(reachable)
    while frontier:
        found: set[str] = set()
        for name in frontier:
            _referenced(schemas[name], found)
        frontier = found - reachable
        reachable |= found
    document["components"]["schemas"] = {k: v for k, v in schemas.items() if k in reachable}


def openapi_document() -> dict[str, Any]:
    """The whole API's document, as a JSON-ready dict (paths and components sorted)."""
    merge = OpenAPIMerge(
        title="memwrite",
        version=_api_version(),
        description=_DESCRIPTION,
        tags=list(_TAGS),
        security=[{SECURITY_SCHEME: []}],
        on_conflict="error",
    )
    schemas = [
        app.get_openapi_schema().model_dump(mode="json", by_alias=True, exclude_none=True)
        for app in _resolvers()
    ]
    _check_components_agree(schemas)
    for schema in schemas:
        merge.add_schema(schema)
    document: dict[str, Any] = json.loads(json.dumps(merge.get_openapi_schema()))
    document["components"]["securitySchemes"] = {SECURITY_SCHEME: _API_KEY}
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if (path, method) in _RAW_BODIES:
                operation["requestBody"] = _RAW_BODIES[(path, method)]
            responses = operation["responses"]
            validation = responses.get("422", {}).get("content", {}).get("application/json", {})
            if validation.get("schema", {}).get("$ref") == _POWERTOOLS_VALIDATION_ERROR:
                del responses["422"]
            operation["responses"] = dict(sorted(responses.items()))
            if path in PUBLIC_PATHS:
                operation["security"] = []
    document["paths"] = dict(sorted(document["paths"].items()))
    _prune_components(document)
    document["components"]["schemas"] = dict(sorted(document["components"]["schemas"].items()))
    return document


def render(document: dict[str, Any]) -> str:
    """The committed form: indented, keys in generation order, one trailing newline."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    """`python -m functions.openapi [--check]`: write the document, or fail if it is stale."""
    text = render(openapi_document())
    if "--check" in argv:
        current = DOCUMENT_PATH.read_text(encoding="utf-8") if DOCUMENT_PATH.exists() else ""
        if current != text:
            sys.stderr.write(f"{DOCUMENT_PATH} is stale: run `make openapi`\n")
            return 1
        return 0
    DOCUMENT_PATH.write_text(text, encoding="utf-8")
    sys.stdout.write(f"wrote {DOCUMENT_PATH}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
