"""Rate gate: identical content from the same user within a window is skipped.

Two layers: a bounded LRU in the process answers repeats seen by this Lambda instance without a
network call, and a shared `RateStore` (a DynamoDB item with a TTL) makes the window hold across
instances. The LRU is an `OrderedDict` rather than a cache library: each entry's expiry depends
on its tenant's window and it must remember which turn claimed it, which is a few lines here.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice

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
        return self.admit_all([(key, claimant, now)], window_secs)[0]

    def admit_all(self, claims: Sequence[tuple[str, str, float]], window_secs: int) -> list[bool]:
        """`admit` for each (key, claimant, now) in order, the shared claims in as few writes
        as that order allows: the LRU sees the same reads and writes as one `admit` after
        another (the claims so far are sent first when a key repeats, when a local refusal
        reorders the LRU, or when remembering them could evict the key looked up)."""
        if window_secs <= 0:
            return [True] * len(claims)
        admitted: list[bool] = []
        pending: dict[str, tuple[int, str, float]] = {}  # key -> (place, claimant, now), unsent
        for key, claimant, now in claims:
            if key in pending or self._may_evict(pending, key):
                self._send(pending, admitted, window_secs)
            local = self._recent.get(key)
            if local is not None and local.expires_at > now and local.claimant != claimant:
                self._send(pending, admitted, window_secs)
                self._recent.move_to_end(key)
                admitted.append(False)
                continue
            pending[key] = (len(admitted), claimant, now)
            admitted.append(False)  # until its claim is sent
        self._send(pending, admitted, window_secs)
        return admitted

    def _may_evict(self, pending: dict[str, tuple[int, str, float]], key: str) -> bool:
        """Whether remembering the pending claims could evict `key` (the oldest entries go)."""
        if key not in self._recent:
            return False
        growth = sum(1 for waiting in pending if waiting not in self._recent)
        overflow = len(self._recent) + growth - self._max_entries
        # A pending key already held moves to the end: the ones evicted are among this many.
        return overflow > 0 and key in islice(self._recent, overflow + len(pending))

    def _send(
        self, pending: dict[str, tuple[int, str, float]], admitted: list[bool], window_secs: int
    ) -> None:
        """Claim the pending keys in the shared store (one write), remember those granted."""
        if not pending:
            return
        claims = [(key, claimant, now) for key, (_, claimant, now) in pending.items()]
        granted = (
            self._shared.claim_all(claims, window_secs)
            if self._shared is not None
            else [True] * len(claims)
        )
        for (key, (place, claimant, now)), ok in zip(pending.items(), granted, strict=True):
            admitted[place] = ok
            if ok:
                self._remember(key, _Claim(claimant, now + window_secs))
        pending.clear()

    def _remember(self, key: str, claim: _Claim) -> None:
        self._recent[key] = claim
        self._recent.move_to_end(key)
        while len(self._recent) > self._max_entries:
            self._recent.popitem(last=False)
