"""The typed Python client of the memwrite API (`pip install "memwrite[client]"`: httpx and
pydantic only), sync and async:

    from memwrite.client import MemwriteClient
    with MemwriteClient("http://127.0.0.1:8080", api_key="local-dev-key") as mw:
        ack = mw.add(user_id="dana", session_id="s-1", turns=[{"role": "user", "content": "..."}])
        trace = mw.wait(ack.trace_id, timeout=30)
        hits = mw.search(user_id="dana", query="where does she live?", k=5)

`add` sends one `Idempotency-Key` per call, so its retries never write twice; connection
errors, 429 and 503 are retried with backoff and jitter, honouring `Retry-After`; every other
refusal raises its own exception (`memwrite.client.errors`) carrying the API's field errors.
"""

from memwrite.client.async_client import AsyncMemwriteClient
from memwrite.client.errors import (
    Forbidden,
    IdempotencyKeyReused,
    InvalidRequest,
    MemwriteApiError,
    MemwriteClientError,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    RollbackRefused,
    ServiceUnreachable,
    Throttled,
    TraceNotFinished,
    TraceWithoutInputs,
    Unauthenticated,
    Unavailable,
    UnsupportedMediaType,
)
from memwrite.client.models import (
    BackfillAck,
    BatchReplay,
    DeletionRecord,
    DirectWriteAck,
    ErasureReport,
    FieldError,
    ImportReport,
    IngestAck,
    Memory,
    MemoryDetail,
    MemoryTraces,
    ReplayDiff,
    RollbackRecord,
    SearchHit,
    TenantSettings,
    Trace,
    Turn,
    UsageReport,
)
from memwrite.client.retry import RetryPolicy
from memwrite.client.sync_client import MemwriteClient

__all__ = [
    "AsyncMemwriteClient",
    "BackfillAck",
    "BatchReplay",
    "DeletionRecord",
    "DirectWriteAck",
    "ErasureReport",
    "FieldError",
    "Forbidden",
    "IdempotencyKeyReused",
    "ImportReport",
    "IngestAck",
    "InvalidRequest",
    "Memory",
    "MemoryDetail",
    "MemoryTraces",
    "MemwriteApiError",
    "MemwriteClient",
    "MemwriteClientError",
    "MethodNotAllowed",
    "NotFound",
    "PayloadTooLarge",
    "ReplayDiff",
    "RetryPolicy",
    "RollbackRecord",
    "RollbackRefused",
    "SearchHit",
    "ServiceUnreachable",
    "TenantSettings",
    "Throttled",
    "Trace",
    "TraceNotFinished",
    "TraceWithoutInputs",
    "Turn",
    "Unauthenticated",
    "Unavailable",
    "UnsupportedMediaType",
    "UsageReport",
]
