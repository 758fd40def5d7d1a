"""Read side of the API: `GET /v1/traces/{trace_id}` (search and memories come later)."""

from __future__ import annotations

from functools import cache
from http import HTTPStatus
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.api_common import json_response, register_error_handlers, tenant_of
from memwrite.traces import get_trace
from memwrite.wiring import ApiDeps, build_api_deps

logger = Logger(service="memwrite-query")
app = APIGatewayRestResolver(enable_validation=True)
register_error_handlers(app)


@cache
def deps() -> ApiDeps:
    return build_api_deps()


@app.get("/v1/traces/<trace_id>")
def get_trace_route(trace_id: str) -> Response[dict[str, Any]]:
    current = deps()
    tenant = tenant_of(app, current.settings.api_keys)
    view = get_trace(tenant, trace_id, current.ingest.ledger, current.ingest.spans)
    if view is None:
        return json_response(HTTPStatus.NOT_FOUND, {"error": "not_found", "trace_id": trace_id})
    return json_response(HTTPStatus.OK, view.model_dump(mode="json"))


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
