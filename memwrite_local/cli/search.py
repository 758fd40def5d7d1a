"""The `memwrite search QUERY --user U` command: `POST /v1/search` on a running server.

Against `memwrite serve` (default `http://127.0.0.1:8080`) or any deployment's URL, with
`--api-key` (default `MEMWRITE_API_KEY`, else the local key); prints the hits, or with `--json`
the API's JSON. Exit status 0, or 1 when the API refuses (its error on stdout).
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any, TextIO

from memwrite_local.runtime.backend import LOCAL_API_KEY

__all__ = ["add_search_parser", "render_hits", "run_search"]


def add_search_parser(commands: Any) -> argparse.ArgumentParser:
    """Register `search` on the CLI's subparsers."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "search", help="search a user's memories on `memwrite serve`"
    )
    parser.add_argument("query")
    parser.add_argument("--user", required=True)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--url", default="http://127.0.0.1:8080")
    parser.add_argument("--api-key", default=os.environ.get("MEMWRITE_API_KEY", LOCAL_API_KEY))
    parser.add_argument("--json", action="store_true", help="the API's JSON on stdout")
    return parser


def render_hits(results: list[dict[str, Any]]) -> str:
    """One line per hit, memory or episode (`kind`): score, kind, id, text, what matched; an
    episode also shows its status (`pending` until a model distils it)."""
    lines = []
    for hit in results:
        if hit["kind"] == "episode":
            ident, status = hit["turn_id"], f" {hit['status']}"
        else:
            ident, status = hit["memory_id"], ""
        matched = ", ".join(hit["matched"])
        lines.append(
            f"  {hit['score']:.3f} {hit['kind']:<7} {ident[:8]} {hit['text']}  ({matched}){status}"
        )
    return "\n".join(lines) or "  (nothing found)"


def run_search(
    url: str, api_key: str, request: dict[str, Any], *, as_json: bool, stdout: TextIO
) -> int:
    """`POST /v1/search` against a running `memwrite serve` (or any deployment's URL)."""
    import urllib.error
    import urllib.request

    body = json.dumps(request).encode()
    http_request = urllib.request.Request(
        f"{url.rstrip('/')}/v1/search",
        data=body,
        headers={"Content-Type": "application/json", "x-api-key": api_key},
        method="POST",
    )
    try:
        with urllib.request.urlopen(http_request, timeout=30) as response:
            status, payload = response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        status, payload = exc.code, json.loads(exc.read() or b"{}")
    if status != 200:
        stdout.write(json.dumps({"error": payload, "status": status}) + "\n")
        return 1
    if as_json:
        stdout.write(json.dumps(payload, ensure_ascii=False) + "\n")
    else:
        stdout.write(render_hits(payload["results"]) + "\n")
    return 0
