"""Rate gate: identical content from the same user within a window is skipped.

Two layers: a bounded LRU in the process answers repeats seen by this Lambda instance without a
network call, and a shared `RateStore` (a DynamoDB item with a TTL) makes the window hold across
instances. The LRU is an `OrderedDict` rather than a cache library: each entry's expiry depends
on its tenant's window and it must remember which turn claimed it, which is a few lines here.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from memwrite.ports import RateStore

__all__ = ["RateGate"]


@dataclass(frozen=True, slots=True)
class _Claim:
    claimant: str
    expires_at: float


class RateGate:
    """Admits content once per window per key; a re-sent turn (same claimant) is admitted again."""

    def __init__(self, max_entries: int, shared: RateStore | None = None) -> None:
        self._max_entries = max_entries
        self._shared = shared
        self._recent: OrderedDict[str, _Claim] = OrderedDict()

    def admit(self, key: str, claimant: str, now: float, window_secs: int) -> bool:
        if window_secs <= 0:
            return True
        local = self._recent.get(key)
        if local is not None and local.expires_at > now and local.claimant != claimant:
            self._recent.move_to_end(key)
            return False
        if self._shared is not None and not self._shared.claim(key, claimant, now, window_secs):
            return False
        self._remember(key, _Claim(claimant, now + window_secs))
        return True

    def _remember(self, key: str, claim: _Claim) -> None:
        self._recent[key] = claim
        self._recent.move_to_end(key)
        while len(self._recent) > self._max_entries:
            self._recent.popitem(last=False)
