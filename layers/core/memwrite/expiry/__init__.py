"""The expiry sweep: announce on the change feed each user expiry (`PATCH /v1/memories/{id}`
`expires_at`) once it passes (`memwrite.expiry.sweep`)."""

from memwrite.expiry.sweep import (
    DEFAULT_LIMIT,
    DOCUMENTS_PER_CALL,
    ExpiryDeps,
    ExpirySweep,
    remove_expired_documents,
    sweep_expiries,
)

__all__ = [
    "DEFAULT_LIMIT",
    "DOCUMENTS_PER_CALL",
    "ExpiryDeps",
    "ExpirySweep",
    "remove_expired_documents",
    "sweep_expiries",
]
