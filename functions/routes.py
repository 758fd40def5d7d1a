"""Every route of the HTTP API, once: its method, its path, the function that serves it and
whether it takes a key.

Everything that routes reads this table: each API handler registers its typed route functions
from it (`functions.api_common.HttpFunction`: a route function the table does not name, or a
row with no route function, fails at import), the CDK app deploys one API Gateway method per
row with the row's authorization (`infra/api.py`), the local runner dispatches by it
(`memwrite_local/runtime/runner.py`, behind `memwrite serve`), the OpenAPI generator marks the
public rows (`functions/openapi.py`) and writes the route list of `docs/reference/api.md`.
Data only (no Powertools), so the CDK app imports it cheaply.

A new route: a row here, its typed function of that name in `functions/<function>/handler.py`
(its summary, tags and responses in `@http.route(...)`), then `make openapi`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["ROUTES", "Auth", "Route", "route_functions"]


class Auth(StrEnum):
    API_KEY = "api_key"  # the authorizer turns the `x-api-key` header into the tenant
    PUBLIC = "public"  # no key: the same answer for every caller, no tenant read


@dataclass(frozen=True)
class Route:
    method: str
    path: str  # the OpenAPI template: a `{name}` is one path segment
    function: str  # the Lambda that serves it: functions/<function>/handler.py
    route_function: str  # the function of that module that answers it
    auth: Auth = Auth.API_KEY

    @property
    def module(self) -> str:
        """The handler module of its function."""
        return f"functions.{self.function}.handler"


ROUTES: tuple[Route, ...] = (
    # Stage 1 runs in the call (memwrite.pre_filter); the rest of the pipeline is queued.
    Route("POST", "/v1/turns", "pre_filter", "post_turns"),
    Route("GET", "/v1/traces/{trace_id}", "api", "get_trace_route"),
    Route("GET", "/v1/memories/{memory_id}/traces", "api", "memory_traces_route"),
    Route("GET", "/v1/users/{user_id}/traces", "api", "user_traces_route"),
    Route("POST", "/v1/traces/{trace_id}/replay", "api", "replay_trace_route"),
    Route("POST", "/v1/users/{user_id}/replay", "api", "replay_user_route"),
    Route("POST", "/v1/traces/{trace_id}/rollback", "api", "rollback_trace_route"),
    Route("POST", "/v1/search", "api", "search_route"),
    Route("GET", "/v1/memories/{memory_id}", "api", "get_memory_route"),
    # Direct memories are queued as turns of their own: the ingest path, stage 1's function.
    Route("POST", "/v1/users/{user_id}/memories", "pre_filter", "post_memories"),
    Route("PATCH", "/v1/memories/{memory_id}", "api", "patch_memory_route"),
    Route("DELETE", "/v1/memories/{memory_id}", "api", "delete_memory_route"),
    Route("GET", "/v1/users/{user_id}/memories", "api", "list_memories_route"),
    Route("DELETE", "/v1/users/{user_id}/memories", "api", "erase_user_route"),
    Route("GET", "/v1/users/{user_id}/export", "api", "export_user_route"),
    Route("POST", "/v1/users/{user_id}/import", "api", "import_user_route"),
    Route("GET", "/v1/users/{user_id}/episodes", "api", "list_episodes_route"),
    Route("POST", "/v1/users/{user_id}/backfill", "api", "backfill_route"),
    Route("GET", "/v1/settings", "api", "get_settings_route"),
    Route("PUT", "/v1/settings", "api", "put_settings_route"),
    Route("GET", "/v1/usage", "api", "usage_route"),
    # The API's own description.
    Route("GET", "/v1/openapi.json", "api", "openapi_route", Auth.PUBLIC),
)


def route_functions() -> tuple[str, ...]:
    """The functions that serve routes, in the table's order."""
    return tuple(dict.fromkeys(route.function for route in ROUTES))
