"""`memwrite keys create --tenant T | list | revoke ID | plan`: the API keys of a deployment.

Against a deployed environment (`--table`, the stack's `ApiKeysTable` output, written with your
AWS credentials; `AWS_ENDPOINT_URL` is honoured) or a local data directory (`--data-dir`, what
`memwrite serve` reads). Only a hash of each key is stored: `create` prints the key once, and
`list` and `revoke` work with its public id. A revoked key stops working within a minute on AWS
(the authorizer's and API Gateway's caches, 30 s each), within 30 s on `memwrite serve`.

`plan --usage-plan ID [--tenant T]` (a deployed environment only) puts a tenant, or every
tenant of the key table, on a usage plan of the API (the stack's `UsagePlan<Name>` outputs):
the plan's rate, burst and daily quota then apply to that tenant's requests, counted per tenant.
A tenant on no plan is refused (403) by API Gateway: `create` on a deployed environment puts a
tenant on no plan yet on the deployment's default plan (the first of its `api_plans`).
Exit status 0 on success, 1 when `revoke` finds no such key, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from memwrite_local.runtime.embedded import DEFAULT_DATA_DIR

if TYPE_CHECKING:
    from memwrite.ports import ApiKeyRecord, ApiKeyStore

__all__ = ["add_keys_parser", "run_keys"]


def add_keys_parser(commands: Any) -> None:
    """Register `keys` (create, list, revoke) on the CLI's subparsers."""
    parser = commands.add_parser(
        "keys",
        help="create, list and revoke API keys (a deployed environment's or a data dir's)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="keys_action", required=True)
    create = actions.add_parser("create", help="a new key for a tenant, printed once")
    create.add_argument("--tenant", required=True)
    listing = actions.add_parser("list", help="every key's id, tenant and creation time")
    listing.add_argument("--tenant", help="only this tenant's keys")
    revoke = actions.add_parser("revoke", help="delete a key by its id")
    revoke.add_argument("key_id")
    plan = actions.add_parser("plan", help="put a tenant (or every tenant) on a usage plan")
    plan.add_argument("--usage-plan", required=True, help="the plan's id (a stack output)")
    plan.add_argument("--tenant", help="this tenant only (default: every tenant with a key)")
    for action in (create, listing, revoke, plan):
        where = action.add_mutually_exclusive_group()
        where.add_argument(
            "--table",
            default=os.environ.get("MEMWRITE_API_KEYS_TABLE"),
            help="a deployed environment's key table (its stack's ApiKeysTable output; "
            "default: $MEMWRITE_API_KEYS_TABLE)",
        )
        where.add_argument(
            "--data-dir",
            type=Path,
            help=f"a local data directory (default, without --table: {DEFAULT_DATA_DIR}/)",
        )
        action.add_argument("--json", action="store_true", help="JSON on stdout")


def _store(args: argparse.Namespace) -> ApiKeyStore:
    from memwrite.wiring import build_api_key_table

    if args.table and args.data_dir is None:
        return build_api_key_table(args.table, os.environ.get("AWS_ENDPOINT_URL"))
    from memwrite.adapters.sqlite.api_keys import SqliteApiKeyStore
    from memwrite.adapters.sqlite.database import open_database

    return SqliteApiKeyStore(open_database(args.data_dir or DEFAULT_DATA_DIR))


def _line(record: ApiKeyRecord) -> str:
    return f"{record.key_id}  {record.tenant:<24} {record.created_at}"


def _public(record: ApiKeyRecord) -> dict[str, str]:
    return {k: v for k, v in asdict(record).items() if k != "key_hash"}


def _plan(args: argparse.Namespace, store: ApiKeyStore, stdout: TextIO) -> int:
    from memwrite.adapters.aws.apigateway_plans import ApiGatewayUsagePlans
    from memwrite.adapters.aws.clients import apigateway_client
    from memwrite.auth.tenant import usage_key

    if not args.table or args.data_dir is not None:
        stdout.write("usage plans are a deployed environment's: pass --table\n")
        return 2
    plans = ApiGatewayUsagePlans(apigateway_client(os.environ.get("AWS_ENDPOINT_URL")))
    tenants = [args.tenant] if args.tenant else sorted({r.tenant for r in store.list_keys()})
    placed = {t: plans.assign(t, usage_key(t), args.usage_plan) for t in tenants}
    if args.json:
        stdout.write(json.dumps({"usage_plan": args.usage_plan, "tenants": placed}) + "\n")
    else:
        stdout.write("".join(f"{t} on {args.usage_plan} (key {k})\n" for t, k in placed.items()))
    return 0


def _admit(args: argparse.Namespace) -> str | None:
    """A tenant on no usage plan yet goes on the deployment's default one (else API Gateway
    refuses its requests): the plan's id, or None when the tenant is on a plan already."""
    from memwrite.adapters.aws.apigateway_plans import ApiGatewayUsagePlans
    from memwrite.adapters.aws.clients import apigateway_client
    from memwrite.auth.tenant import usage_key

    plans = ApiGatewayUsagePlans(apigateway_client(os.environ.get("AWS_ENDPOINT_URL")))
    try:
        return plans.admit(args.tenant, usage_key(args.tenant), args.table)
    except LookupError as exc:  # a stack from before the default plan's tag: the key stands
        sys.stderr.write(f"{exc}: put the tenant on a plan with `memwrite keys plan`\n")
        return None


def run_keys(args: argparse.Namespace, stdout: TextIO) -> int:
    from memwrite.auth.api_keys import create_key

    store = _store(args)
    if args.keys_action == "plan":
        return _plan(args, store, stdout)
    if args.keys_action == "create":
        issued = create_key(store, args.tenant)
        placed = _admit(args) if args.table and args.data_dir is None else None
        if args.json:
            stdout.write(json.dumps({**_public(issued.record), "key": issued.key}) + "\n")
        else:
            stdout.write(
                f"key {issued.record.key_id} for tenant {issued.record.tenant}:\n"
                f"  {issued.key}\n"
                "shown once: only its hash is stored. Send it as the x-api-key header.\n"
            )
            if placed is not None:
                stdout.write(f"tenant {args.tenant} put on the default usage plan {placed}\n")
        return 0
    if args.keys_action == "list":
        records = store.list_keys(args.tenant)
        if args.json:
            stdout.write(json.dumps([_public(r) for r in records]) + "\n")
        else:
            stdout.write("".join(_line(r) + "\n" for r in records) or "no keys\n")
        return 0
    revoked = store.revoke(args.key_id)
    if revoked is None:
        stdout.write(json.dumps(None) + "\n" if args.json else f"no key {args.key_id}\n")
        return 1
    if args.json:
        stdout.write(json.dumps(_public(revoked)) + "\n")
    else:
        stdout.write(f"revoked {_line(revoked)}\n")
    return 0
