"""The OpenAPI 3.1 document of the API, generated from the handlers' resolvers, and the route
list of `docs/reference/api.md`, generated from the route table and the document.

Each function of the route table (`functions/routes.py`: pre_filter and api, two Lambdas behind
one API) is a Powertools resolver that generates its own schema from its routes, models and
`responses=`; Powertools' `OpenAPIMerge` joins them (a path and method defined twice is an
error). What no resolver can say is added here: the `x-api-key` security scheme, no security on
the table's public routes, and the removal of the 422 `HTTPValidationError` Powertools declares
on every validated route (our validation errors are 400s with field errors; the only 422 is a
reused `Idempotency-Key`).

`make openapi` writes `functions/openapi.json`, which the api function serves at
`GET /v1/openapi.json`, and the route list between the markers of `docs/reference/api.md` and
`README.md` (one row per route, in the table's order, linked to the route's own section of the
API page); a test fails when any of them is stale.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from aws_lambda_powertools.event_handler.openapi.merge import OpenAPIMerge
from aws_lambda_powertools.event_handler.openapi.models import Tag

from functions.routes import ROUTES, Auth, route_functions

__all__ = [
    "API_PAGE",
    "DOCUMENT_PATH",
    "ROUTE_LIST_PAGES",
    "openapi_document",
    "render",
    "route_list",
    "route_list_pages",
    "with_route_list",
]

DOCUMENT_PATH = Path(__file__).resolve().parent / "openapi.json"
_ROOT = Path(__file__).resolve().parents[1]
API_PAGE = _ROOT / "docs" / "reference" / "api.md"
# The pages that list the routes, each with the path from it to the API page (the routes'
# sections, which the list links to).
ROUTE_LIST_PAGES = {API_PAGE: "", _ROOT / "README.md": "docs/reference/api.md"}
ROUTE_LIST_START = (
    "<!-- The route list: generated from functions/routes.py and the routes' OpenAPI summaries\n"
    "     by `make openapi`; tests/integration/test_openapi.py fails while it is stale. -->"
)
ROUTE_LIST_END = "<!-- end of the route list -->"
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
    return [importlib.import_module(f"functions.{f}.handler").app for f in route_functions()]


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
    public = {(route.path, route.method.lower()) for route in ROUTES if route.auth is Auth.PUBLIC}
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if (path, method) in _RAW_BODIES:
                operation["requestBody"] = _RAW_BODIES[(path, method)]
            responses = operation["responses"]
            validation = responses.get("422", {}).get("content", {}).get("application/json", {})
            if validation.get("schema", {}).get("$ref") == _POWERTOOLS_VALIDATION_ERROR:
                del responses["422"]
            operation["responses"] = dict(sorted(responses.items()))
            if (path, method) in public:
                operation["security"] = []
    document["paths"] = dict(sorted(document["paths"].items()))
    _prune_components(document)
    document["components"]["schemas"] = dict(sorted(document["components"]["schemas"].items()))
    return document


def render(document: dict[str, Any]) -> str:
    """The committed form: indented, keys in generation order, one trailing newline."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def _anchor(heading: str) -> str:
    """The id MkDocs gives a heading (Python-Markdown's `toc` slugify)."""
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", heading).strip().lower())


def route_list(document: dict[str, Any], api_page: str, link: str = "") -> str:
    """The route table as a Markdown list: each route linked to its own section of the API page
    (`api_page`, the page's text: a heading `` `METHOD /path` `` every route must have; `link`,
    the page's path from where the list is), the function that serves it, whether it takes a
    key, and its OpenAPI summary."""
    rows = ["| method | path | function | key | what it does |", "| --- | --- | --- | --- | --- |"]
    for route in ROUTES:
        heading = f"{route.method} {route.path}"
        if f"### `{heading}`" not in api_page:
            raise ValueError(f"docs/reference/api.md has no section `### {heading}`")
        summary = document["paths"][route.path][route.method.lower()]["summary"]
        key = "`x-api-key`" if route.auth is Auth.API_KEY else "none"
        rows.append(
            f"| `{route.method}` | [`{route.path}`]({link}#{_anchor(heading)}) "
            f"| `{route.function}` | {key} | {summary} |"
        )
    return "\n".join(rows)


def with_route_list(page: str, listing: str) -> str:
    """`page` with `listing` between its route list's markers."""
    before, start, rest = page.partition(ROUTE_LIST_START)
    _, end, after = rest.partition(ROUTE_LIST_END)
    if not start or not end:
        raise ValueError("a page of ROUTE_LIST_PAGES has lost the route list's markers")
    # Blank lines around it: Markdown would read a table touching a comment as HTML.
    return f"{before}{start}\n\n{listing}\n\n{end}{after}"


def route_list_pages(document: dict[str, Any]) -> dict[Path, str]:
    """Each page of `ROUTE_LIST_PAGES` as it should be: with the current route list."""
    api_page = API_PAGE.read_text(encoding="utf-8")
    return {
        path: with_route_list(
            path.read_text(encoding="utf-8"), route_list(document, api_page, link)
        )
        for path, link in ROUTE_LIST_PAGES.items()
    }


def main(argv: list[str]) -> int:
    """`python -m functions.openapi [--check]`: write the document and the pages' route
    lists, or fail if any is stale."""
    document = openapi_document()
    generated = {
        DOCUMENT_PATH: render(document),
        **route_list_pages(document),
    }
    if "--check" in argv:
        stale = [
            path
            for path, text in generated.items()
            if not path.exists() or path.read_text(encoding="utf-8") != text
        ]
        for path in stale:
            sys.stderr.write(f"{path} is stale: run `make openapi`\n")
        return 1 if stale else 0
    for path, text in generated.items():
        path.write_text(text, encoding="utf-8")
        sys.stdout.write(f"wrote {path}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
