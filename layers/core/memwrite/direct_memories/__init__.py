"""Direct memories (`POST /v1/users/{user_id}/memories`): memories a caller writes itself.

No extraction call: each becomes a candidate as written (`memwrite.extract.direct_candidate`), and
resolve, dedupe, conflict, persist and indexing run on it as on any other, so a direct write
supersedes, merges and is traced like the rest. Its source is `direct`: full source weight,
and it replaces a pinned memory, which an inferred one does only when the user states it as
an explicit correction. `memwrite.pre_filter.direct_memories` queues them.
"""

from memwrite.direct_memories.model import (
    DIRECT_SESSION,
    MAX_DIRECT_MEMORIES,
    DirectMemoriesRequest,
    DirectMemory,
    DirectWriteAccepted,
)

__all__ = [
    "DIRECT_SESSION",
    "MAX_DIRECT_MEMORIES",
    "DirectMemoriesRequest",
    "DirectMemory",
    "DirectWriteAccepted",
]
