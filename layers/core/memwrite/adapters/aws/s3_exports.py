"""Exports too large for one Lambda response, stored in the environment's exports bucket
(`memwrite.ports.ExportSpill`).

Each export is a new object `exports/<tenant>/<user>/<time>-<random>.ndjson` (SSE-S3), answered
with a presigned GET URL signed by the function's own role, valid `EXPIRES_IN_SECS`; the
bucket's lifecycle rule deletes the object after a day. A failed put raises `ExportUnstored`
(transient: a 503, the caller retries).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from memwrite.errors import ExportUnstored
from memwrite.records.user_snapshot import SpilledExport

__all__ = ["EXPIRES_IN_SECS", "KEY_PREFIX", "S3ExportSpill"]

KEY_PREFIX = "exports/"
EXPIRES_IN_SECS = 15 * 60
_NDJSON = "application/x-ndjson"


class S3ExportSpill:
    def __init__(self, client: Any, bucket: str) -> None:  # boto3 "s3" (no stubs)
        self._client = client
        self._bucket = bucket

    def put(self, tenant: str, user_id: str, body: bytes) -> SpilledExport:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        key = f"{KEY_PREFIX}{tenant}/{user_id}/{stamp}-{uuid.uuid4().hex}.ndjson"
        try:
            self._client.put_object(
                Bucket=self._bucket,
                Key=key,
                Body=body,
                ContentType=_NDJSON,
                ServerSideEncryption="AES256",
            )
            url = self._client.generate_presigned_url(
                "get_object",
                Params={"Bucket": self._bucket, "Key": key},
                ExpiresIn=EXPIRES_IN_SECS,
            )
        except (ClientError, BotoCoreError) as exc:
            raise ExportUnstored(f"export not stored in {self._bucket}: {exc}") from exc
        return SpilledExport(url=url, expires_in=EXPIRES_IN_SECS, size=len(body))
