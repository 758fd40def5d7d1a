"""API keys created and revoked with `memwrite keys`, without a redeploy: against a deployed
environment's table (moto here) and against a local data directory (`memwrite serve`)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import boto3
import pytest

import functions.authorizer.handler as authorizer
from memwrite.adapters.aws.apigateway_plans import DEFAULT_PLAN_TAG
from memwrite.auth.api_keys import hash_key
from memwrite.auth.tenant import usage_key
from memwrite_local.cli import main
from memwrite_local.runtime.backend import LOCAL_API_KEY
from tests.cli_process import run_memwrite, run_memwrite_in_process
from tests.integration.conftest import MakeLocal
from tests.serve_process import running_serve

BODY = {
    "session_id": "s1",
    "user_id": "dana",
    "turns": [{"role": "user", "content": "I live in Berlin with my partner Alex."}],
}


def _keys(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    status = main(["keys", *args, "--json"])
    return status, json.loads(capsys.readouterr().out)


def test_a_key_created_on_the_table_authenticates_until_revoked(
    make_local: MakeLocal, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a deployed environment (moto) and a key created with `memwrite keys --table`
    local = make_local(backend="moto")
    assert local.aws.resources is not None
    table = local.aws.resources.table_names["api_keys"]
    status, created = _keys(capsys, "create", "--tenant", "acme", "--table", table)
    assert status == 0
    key = created["key"]

    # When a request carries it (through the authorizer Lambda, as API Gateway calls it)
    accepted = local.post_turns(BODY, api_key=key)

    # Then it is the tenant's: its trace is readable with the key, not with another tenant's
    assert accepted.status == 202
    trace_id = accepted.body["trace_id"]
    assert local.get_trace(trace_id, api_key=key).status == 200
    # (and the default key, retired now that the table holds a key, is refused)
    assert local.get_trace(trace_id, api_key=LOCAL_API_KEY).status == 401
    # And the table holds its hash, never the key; `list` shows its id and tenant only
    status, listed = _keys(capsys, "list", "--table", table)
    assert listed == [{k: created[k] for k in ("key_id", "tenant", "created_at")}]
    items = boto3.client("dynamodb").scan(TableName=table)["Items"]
    assert [item["pk"]["S"] for item in items] == [hash_key(key)]
    assert key not in json.dumps(items) + json.dumps(listed)

    # When it is revoked (no redeploy)
    status, revoked = _keys(capsys, "revoke", created["key_id"], "--table", table)
    assert status == 0 and revoked["key_id"] == created["key_id"]
    # Then an authorizer instance that used it keeps its answer only briefly (KEY_CACHE_SECS,
    # unit-tested), and any instance past that refuses it
    authorizer.resolver.cache_clear()
    assert local.post_turns(BODY, api_key=key).status == 401
    # And revoking it again finds nothing
    assert _keys(capsys, "revoke", created["key_id"], "--table", table) == (1, None)
    # And no key ever reached the logs
    assert key not in capsys.readouterr().out


def test_keys_of_a_data_dir_replace_the_default_key_of_serve(tmp_path: Path) -> None:
    # Given two keys created in a data directory, one of them revoked
    data_dir = tmp_path / "data"

    def keys(*args: str) -> Any:  # in this process: the server below reads them in its own
        result = run_memwrite_in_process("keys", *args, "--data-dir", str(data_dir), "--json")
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    kept, revoked = keys("create", "--tenant", "acme"), keys("create", "--tenant", "acme")
    assert keys("revoke", revoked["key_id"])["key_id"] == revoked["key_id"]
    assert [k["key_id"] for k in keys("list")] == [kept["key_id"]]

    # When `memwrite serve` runs on that directory
    with running_serve(data_dir) as server:

        def post(api_key: str) -> int:
            request = urllib.request.Request(
                f"{server.base_url}/v1/turns",
                data=json.dumps(BODY).encode(),
                headers={"Content-Type": "application/json", "x-api-key": api_key},
                method="POST",
            )
            try:
                with urllib.request.urlopen(request, timeout=30) as reply:
                    return int(reply.status)
            except urllib.error.HTTPError as error:
                return error.code

        # Then the kept key works, the revoked one and the default key do not
        assert post(kept["key"]) == 202
        assert post(revoked["key"]) == 401
        assert post(LOCAL_API_KEY) == 401
        assert LOCAL_API_KEY not in server.banner


def test_a_tenant_must_be_an_identifier(tmp_path: Path) -> None:
    result = run_memwrite("keys", "create", "--tenant", "no spaces", "--data-dir", str(tmp_path))
    assert result.returncode == 2
    assert "tenant" in result.stderr


def test_keys_plan_puts_each_tenant_on_a_usage_plan_the_authorizer_names(
    make_local: MakeLocal, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a deployed environment (moto) with keys of two tenants and two usage plans
    local = make_local(backend="moto")
    assert local.aws.resources is not None
    table = local.aws.resources.table_names["api_keys"]
    for tenant in ("acme", "globex"):
        _keys(capsys, "create", "--tenant", tenant, "--table", table)
    gateway = boto3.client("apigateway")
    standard, large = (gateway.create_usage_plan(name=name)["id"] for name in ("std", "large"))
    # When every tenant goes on the standard plan, then globex alone on the large one
    status, placed = _keys(capsys, "plan", "--usage-plan", standard, "--table", table)
    assert status == 0 and set(placed["tenants"]) == {"acme", "globex"}
    _keys(capsys, "plan", "--usage-plan", large, "--tenant", "globex", "--table", table)
    # Then each tenant's usage key is on one plan: acme's standard, globex's large
    for tenant, plan in (("acme", standard), ("globex", large)):
        on = gateway.get_usage_plans(keyId=placed["tenants"][tenant])["items"]
        assert [p["id"] for p in on] == [plan]
    # And the authorizer answers that key for a request of the tenant (what the plan counts)
    (key,) = [
        k["value"]
        for k in gateway.get_api_keys(includeValues=True)["items"]
        if k["id"] == placed["tenants"]["acme"]
    ]
    _, created = _keys(capsys, "create", "--tenant", "acme", "--table", table)
    authorizer.resolver.cache_clear()
    answer = authorizer.lambda_handler(
        {
            "headers": {"x-api-key": created["key"]},
            "methodArn": "arn:aws:execute-api:us-east-1:123456789012:api/v1/POST/v1/turns",
        },
        _Context(),
    )
    assert answer["usageIdentifierKey"] == key
    assert answer["context"] == {"tenant_id": "acme"}


def test_a_new_tenants_first_key_puts_it_on_the_default_usage_plan(
    make_local: MakeLocal, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a deployed environment (moto) whose default plan carries its key table's tag
    local = make_local(backend="moto")
    assert local.aws.resources is not None
    table = local.aws.resources.table_names["api_keys"]
    gateway = boto3.client("apigateway")
    standard = gateway.create_usage_plan(name="std", tags={DEFAULT_PLAN_TAG: table})["id"]
    gateway.create_usage_plan(name="other", tags={DEFAULT_PLAN_TAG: "another-deployment"})
    large = gateway.create_usage_plan(name="large")["id"]
    # When a new tenant's first key is created
    assert _keys(capsys, "create", "--tenant", "acme", "--table", table)[0] == 0
    # Then the tenant's usage key is on the default plan, API Gateway admits its requests
    (api_key,) = gateway.get_api_keys(nameQuery=usage_key("acme"))["items"]
    assert [p["id"] for p in gateway.get_usage_plans(keyId=api_key["id"])["items"]] == [standard]
    # When the tenant is moved to another plan and then gets a second key
    _keys(capsys, "plan", "--usage-plan", large, "--tenant", "acme", "--table", table)
    assert _keys(capsys, "create", "--tenant", "acme", "--table", table)[0] == 0
    # Then it stays on its plan, with one API key
    assert [p["id"] for p in gateway.get_usage_plans(keyId=api_key["id"])["items"]] == [large]
    assert len(gateway.get_api_keys(nameQuery=usage_key("acme"))["items"]) == 1


class _Context:
    function_name = "authorizer"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:authorizer"
    aws_request_id = "request"
