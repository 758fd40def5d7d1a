"""`export_user` on httpx's MockTransport: a 303 (an export too large for one response) is
followed to its presigned URL, and the API key never goes there; a 200 is the export as is."""

from __future__ import annotations

import asyncio

import httpx

from memwrite.client import AsyncMemwriteClient, MemwriteClient

LINES = '{"kind":"header"}\n{"kind":"memory"}\n'
PRESIGNED = "https://exports.s3.amazonaws.com/exports/t/dana/x.ndjson?X-Amz-Signature=abc"


def api_and_s3(seen: list[httpx.Request]) -> httpx.MockTransport:
    """The API answers the export with a 303; the bucket serves the lines at the URL."""

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.host == "memwrite":
            body = {"url": PRESIGNED, "bytes": len(LINES), "expires_in": 900}
            return httpx.Response(303, json=body, headers={"Location": PRESIGNED})
        if str(request.url) != PRESIGNED:
            return httpx.Response(403, text="<Error><Code>SignatureDoesNotMatch</Code></Error>")
        return httpx.Response(200, text=LINES, headers={"Content-Type": "application/x-ndjson"})

    return httpx.MockTransport(handle)


def test_the_sync_client_follows_a_303_without_the_api_key() -> None:
    seen: list[httpx.Request] = []
    with MemwriteClient("http://memwrite", "secret-key", transport=api_and_s3(seen)) as mw:
        exported = mw.export_user("dana")
    assert exported == LINES
    api, s3 = seen
    assert api.headers["x-api-key"] == "secret-key"
    assert str(s3.url) == PRESIGNED and "x-api-key" not in s3.headers


def test_the_async_client_follows_a_303_without_the_api_key() -> None:
    seen: list[httpx.Request] = []

    async def run() -> str:
        transport = api_and_s3(seen)
        async with AsyncMemwriteClient("http://memwrite", "secret-key", transport=transport) as mw:
            return await mw.export_user("dana")

    assert asyncio.run(run()) == LINES
    assert [r.url.host for r in seen] == ["memwrite", "exports.s3.amazonaws.com"]
    assert "x-api-key" not in seen[1].headers
