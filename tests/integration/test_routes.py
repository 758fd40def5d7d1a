"""The route table (`functions/routes.py`) as the local runner plays API Gateway: every row is
answered by the handler of the function it names, behind the authorizer unless it is public.
(The deployed side: tests/infrastructure/test_function_wiring.py; the document's:
tests/integration/test_openapi.py.)"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Never

import pytest

from functions.api_common import HttpFunction
from functions.routes import ROUTES, Auth, Route, route_functions
from tests.integration.conftest import MakeLocal

SAMPLE_SEGMENT = {
    "{trace_id}": "0123456789abcdef0123456789abcdef",
    "{memory_id}": "0123456789abcdef0123456789abcdef",
    "{user_id}": "dana",
}


def concrete(path: str) -> str:
    for placeholder, value in SAMPLE_SEGMENT.items():
        path = path.replace(placeholder, value)
    return path


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: f"{r.method} {r.path}")
def test_every_route_is_answered_by_its_function_with_the_tables_authorization(
    make_local: MakeLocal, route: Route
) -> None:
    # Given the local runner on SQLite, and a call of the route
    local = make_local(backend="sqlite")
    path = concrete(route.path)
    body = None if route.method in {"GET", "DELETE"} else {}
    # When it is called without a key
    unkeyed = local.runner.call(route.method, path, body, api_key=None)
    # Then a keyed route is refused before its handler, a public one is answered
    if route.auth is Auth.API_KEY:
        assert (unkeyed.status, unkeyed.body["error"]) == (401, "unauthenticated"), unkeyed
    else:
        assert unkeyed.status == 200, unkeyed
    # And with the key it reaches the handler of its function: neither the runner's own
    # 404/405 nor the resolver's "Not found" of a route it does not have
    keyed = local.runner.call(route.method, path, body, api_key=local.api_key)
    assert keyed.status not in {401, 405}, keyed
    assert keyed.body != {"error": "not_found", "path": path}, keyed
    assert keyed.body.get("message") != "Not found", keyed


@pytest.mark.parametrize("function", route_functions())
def test_each_function_resolves_exactly_its_rows_of_the_table(function: str) -> None:
    # Given the resolver of a function the table names
    app = importlib.import_module(f"functions.{function}.handler").app
    # Then it serves the rows naming that function, nothing registered around the table
    served = {
        (route.method, route.openapi_path, route.func.__name__)
        for route in [*app._static_routes, *app._dynamic_routes]
    }
    rows = {(r.method, r.path, r.route_function) for r in ROUTES if r.function == function}
    assert served == rows


def test_a_route_function_the_table_does_not_name_fails_at_registration() -> None:
    # Given the api function's routes
    http = HttpFunction("api", _no_deps)
    # When a route function the table has no row for is registered / Then it is refused
    with pytest.raises(LookupError, match=r"api\.get_everything"):

        @http.route(summary="-", tags=[], responses={})
        def get_everything() -> None: ...


def test_a_row_without_its_route_function_fails_the_check() -> None:
    # Given the api function with all its route functions but one registered
    http = HttpFunction("api", _no_deps)
    rows = [route for route in ROUTES if route.function == "api"]
    for route in rows[1:]:
        http.route(summary="-", tags=[], responses={})(_named(route.route_function))
    # When the handler module checks its routes / Then the missing one is named
    with pytest.raises(LookupError, match=rows[0].route_function):
        http.check_routes()


def _named(name: str) -> Callable[[], None]:
    def route_function() -> None: ...

    route_function.__name__ = name
    return route_function


def _no_deps() -> Never:
    raise AssertionError("registering routes builds no deps")
