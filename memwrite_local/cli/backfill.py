"""The `memwrite backfill [--user U] [--since T] [--until T] [--mode live|batch] [--wait]`
command: distil pending episodes in a local data directory with the configured model.

Live (the default, `pipeline.backfill.mode`): the same library call as `POST
/v1/users/{user_id}/backfill`, for one user or (without `--user`) every user of the tenant
with a pending episode. Batch: one round of the batch lane over every tenant (the open batches
polled and the ended ones applied, then what is pending submitted to the provider's batch API),
or with `--wait` rounds every `backfill.poll_secs` until no episode is in a batch. Then stage 7
over the outbox, so the new memories are searchable when it returns. Exit status 0 when done
(also when nothing was pending), 1 when refused (no model, unknown user, bad times), 2 on bad
usage.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, TextIO

from memwrite.adapters.sqlite.database import DATABASE_FILE
from memwrite.errors import InvalidQuery, ModelRequired, UnknownUser
from memwrite_local.runtime.backend import LOCAL_TENANT
from memwrite_local.runtime.embedded import DEFAULT_DATA_DIR

__all__ = ["add_backfill_parser", "run_backfill"]


def add_backfill_parser(commands: Any) -> None:
    """Register `backfill` on the CLI's subparsers."""
    parser = commands.add_parser(
        "backfill",
        help="run pending episodes through extraction with the configured model (local data dir)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--user", help="one user (default: every user with a pending episode)")
    parser.add_argument("--since", help="only episodes observed at or after (ISO 8601)")
    parser.add_argument("--until", help="only episodes observed at or before (ISO 8601)")
    parser.add_argument("--json", action="store_true", help="one JSON object per user (round)")
    parser.add_argument(
        "--mode",
        choices=("live", "batch"),
        help="live calls, or the provider's batch API (default: pipeline.backfill.mode)",
    )
    parser.add_argument(
        "--wait",
        action="store_true",
        help="batch mode: poll every backfill.poll_secs until no episode is in a batch",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        help=f"the state of `memwrite serve` / `ingest --data-dir` (default: {DEFAULT_DATA_DIR}/)",
    )
    parser.add_argument(
        "--tenant", default=LOCAL_TENANT, help=f"the users' tenant (default: {LOCAL_TENANT})"
    )


def _refusal(error: str, message: str, as_json: bool, stdout: TextIO) -> int:
    if as_json:
        stdout.write(json.dumps({"error": error, "message": message}) + "\n")
    else:
        stdout.write(f"{error}: {message}\n")
    return 1


def run_backfill(args: argparse.Namespace, stdout: TextIO) -> int:
    from memwrite.backfill import BackfillRequest, backfill_user
    from memwrite.wiring import build_backfill_deps
    from memwrite_local.runtime.embedded import local_backend
    from memwrite_local.runtime.runner import DrainReport, LocalRunner

    data_dir: Path = args.data_dir
    if not (data_dir / DATABASE_FILE).is_file():
        raise ValueError(f"{data_dir} holds no memwrite data (no {DATABASE_FILE})")
    body = {key: value for key in ("since", "until") if (value := getattr(args, key))}
    with local_backend("sqlite", data_dir):
        runner = LocalRunner()
        try:
            request = BackfillRequest.parse(json.dumps(body))
        except InvalidQuery as exc:
            return _refusal("invalid_request", str(exc), args.json, stdout)
        deps = build_backfill_deps()
        if (args.mode or deps.configs.settings.pipeline.backfill.mode) == "batch":
            return _batch_rounds(args, runner, stdout)
        config = deps.configs.for_request(args.tenant)
        users = (
            [args.user]
            if args.user
            else [user for _, user in deps.episodes.pending_users(args.tenant)]
        )
        for user_id in users:
            try:
                result = backfill_user(args.tenant, user_id, request, config, deps)
            except (UnknownUser, ModelRequired) as exc:
                error = "not_found" if isinstance(exc, UnknownUser) else "model_required"
                return _refusal(error, str(exc), args.json, stdout)
            runner.index_outbox(DrainReport())  # what it stored, searchable
            if args.json:
                stdout.write(json.dumps(result.as_json()) + "\n")
            else:
                stdout.write(
                    f"{user_id}: {result.episodes} pending episodes, {result.extracted} extracted"
                    f" into {len(result.memory_ids)} memories, {result.still_pending} still"
                    f" pending (trace {result.trace_id or '-'})\n"
                )
        if not users and not args.json:
            stdout.write("no pending episodes\n")
    return 0


def _batch_rounds(args: argparse.Namespace, runner: Any, stdout: TextIO) -> int:
    """Rounds of the batch lane (one, or with `--wait` until no episode is in a batch)."""
    from memwrite.backfill import run_batch_round
    from memwrite.wiring import build_batch_deps
    from memwrite_local.runtime.runner import DrainReport

    lane = build_batch_deps()
    poll_secs = lane.backfill.configs.settings.pipeline.backfill.poll_secs
    while True:
        try:
            done = run_batch_round(lane.backfill.configs.for_request, lane)
        except ModelRequired as exc:
            return _refusal("model_required", str(exc), args.json, stdout)
        runner.index_outbox(DrainReport())  # what it stored, searchable
        if args.json:
            stdout.write(json.dumps(done.as_json()) + "\n")
        else:
            stdout.write(
                f"batches applied {len(done.applied_batches)}: {done.extracted} episodes"
                f" extracted into {len(done.memory_ids)} memories, {done.returned_to_pending}"
                f" back to pending; submitted {len(done.submitted_batches)} batches of"
                f" {done.submitted_episodes} episodes; {done.episodes_in_batches} episodes in"
                f" batches\n"
            )
        if not args.wait or done.episodes_in_batches == 0:
            return 0
        time.sleep(poll_secs)
