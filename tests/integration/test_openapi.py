"""The OpenAPI document: generated from the handlers, committed, served without a key, and
complete (every route of the route table, body, response and error shape); and the route list
of docs/reference/api.md, generated from the table."""

from __future__ import annotations

import json
import threading
import urllib.request

import pytest

from functions.openapi import (
    API_PAGE,
    DOCUMENT_PATH,
    openapi_document,
    render,
    route_list,
    route_list_pages,
)
from functions.routes import ROUTES, Auth
from memwrite_local.runtime.server import make_server
from tests.integration.conftest import Local, MakeLocal

ERROR_CODES = {"400", "401", "403", "429", "503"}


def test_the_committed_document_is_the_one_the_handlers_generate() -> None:
    # Given the document the handlers' resolvers generate now
    generated = render(openapi_document())
    # Then it is the committed one, byte for byte (else: `make openapi`, and commit it)
    assert DOCUMENT_PATH.read_text(encoding="utf-8") == generated, "stale: run `make openapi`"


def test_the_committed_route_lists_are_the_generated_ones() -> None:
    # Given the pages that list the routes, as they should be now
    for path, generated in route_list_pages(openapi_document()).items():
        page = path.read_text(encoding="utf-8")
        # Then each is the committed one (else `make openapi`)
        assert page == generated, f"{path} is stale: run `make openapi`"
        # And every route of the table is a row, linked to its section of the API page
        for route in ROUTES:
            assert f"| `{route.method}` | [`{route.path}`](" in page, (path, route)


def test_a_route_without_its_section_on_the_api_page_fails_the_generation() -> None:
    # Given the API page without the section of `PUT /v1/settings`
    page = API_PAGE.read_text(encoding="utf-8").replace("### `PUT /v1/settings`", "### Put")
    # When the route list is generated / Then it names the missing section
    with pytest.raises(ValueError, match="PUT /v1/settings"):
        route_list(openapi_document(), page)


def test_every_route_of_the_table_is_documented_and_nothing_else() -> None:
    # Given the document the handlers' resolvers generate
    document = openapi_document()
    documented = {
        (method.upper(), path) for path, item in document["paths"].items() for method in item
    }
    # Then its operations are the table's routes (no route registered around the table)
    assert documented == {(route.method, route.path) for route in ROUTES}
    assert document["openapi"].startswith("3.1")


def test_every_operation_documents_its_body_its_success_and_its_errors_with_schemas() -> None:
    document = openapi_document()
    schemas = document["components"]["schemas"]
    public = {(route.method, route.path) for route in ROUTES if route.auth is Auth.PUBLIC}
    for path, item in document["paths"].items():
        for method, operation in item.items():
            responses = operation["responses"]
            # Then each answer names a JSON schema (the export: JSON lines), and no Powertools
            # 422 is left over
            for status, response in responses.items():
                (media_type,) = response["content"]
                assert media_type in {"application/json", "application/x-ndjson"}
                schema = response["content"][media_type]["schema"]
                ref = schema.get("$ref")
                assert ref is None or ref.rsplit("/", 1)[1] in schemas, (method, path, status)
                assert ref != "#/components/schemas/HTTPValidationError"
            assert any(code.startswith("2") for code in responses), (method, path)
            if (method.upper(), path) in public:
                assert operation["security"] == []
                continue
            # And every route that takes a key documents the common refusals
            assert set(responses) >= ERROR_CODES, (method, path)
            if method in {"post"} and path != "/v1/traces/{trace_id}/rollback":
                assert "requestBody" in operation, (method, path)
    # And the error body is the handlers' own shape
    assert set(schemas["ApiError"]["properties"]) == {"error", "errors", "message"}
    assert document["components"]["securitySchemes"]["apiKey"]["name"] == "x-api-key"


def test_the_document_is_served_without_a_key_and_the_explorer_at_docs(
    make_local: MakeLocal,
) -> None:
    # Given `memwrite serve` on SQLite
    local: Local = make_local(backend="sqlite")
    httpd = make_server(local.runner, 0, max_body_bytes=65_536)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        # When a client without any key asks for the document and the explorer
        with urllib.request.urlopen(f"{base}/v1/openapi.json", timeout=5) as reply:
            served = json.loads(reply.read())
        with urllib.request.urlopen(f"{base}/docs", timeout=5) as reply:
            page = reply.read().decode("utf-8")
            content_type = reply.headers["Content-Type"]
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
    # Then the document is the committed one, and the explorer is Swagger UI showing it
    assert served == json.loads(DOCUMENT_PATH.read_text(encoding="utf-8"))
    assert content_type.startswith("text/html")
    assert "SwaggerUIBundle" in page and '"/v1/turns"' in page
