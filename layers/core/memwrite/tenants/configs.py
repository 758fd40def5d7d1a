"""The effective config of a request: the deployment's settings with the tenant's stored ones
laid over them (`Settings.for_request`), each tenant's read at most once per cache period.

The cache is what makes a change "apply within a minute without a redeploy" on AWS: every
function instance re-reads a tenant's settings once its entry is `cache_secs` old (<= 60).
A write through `put` refreshes this instance's entry at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from pydantic import ValidationError

from memwrite.config.settings import PipelineConfig, Settings
from memwrite.config.tenant_overrides import TenantOverrides, Webhook

if TYPE_CHECKING:
    from memwrite.ports import TenantSettingsStore

__all__ = ["MAX_CACHE_SECS", "SETTINGS_CACHE_SECS", "TenantConfigs"]

logger = logging.getLogger(__name__)

SETTINGS_CACHE_SECS = 30.0  # a stored change reaches every instance within this
MAX_CACHE_SECS = 60.0  # the promise: a change applies within a minute
_MAX_CACHED_TENANTS = 1_024  # entries kept per instance (least recently read dropped)


class TenantConfigs:
    """`for_request(tenant, agent_id)`: the deployment's file, then the tenant's stored
    settings (when `store` is given: the function may read them), then the agent's."""

    def __init__(
        self,
        settings: Settings,
        store: TenantSettingsStore | None = None,
        *,
        cache_secs: float = SETTINGS_CACHE_SECS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 0 <= cache_secs <= MAX_CACHE_SECS:
            raise ValueError(f"cache_secs must be within 0..{MAX_CACHE_SECS}")
        self.settings = settings
        self.store = store
        self._cache_secs = cache_secs
        self._clock = clock
        self._lock = threading.Lock()
        self._cached: OrderedDict[str, tuple[float, TenantOverrides | None]] = OrderedDict()

    def stored(self, tenant: str) -> TenantOverrides | None:
        """The tenant's stored settings (cached); None without a store or settings."""
        if self.store is None:
            return None
        now = self._clock()
        with self._lock:
            entry = self._cached.get(tenant)
            if entry is not None and now - entry[0] < self._cache_secs:
                self._cached.move_to_end(tenant)
                return entry[1]
        try:
            found = self.store.get(tenant)
        except ValidationError:
            # Written by a version whose models differed: the file's settings, loudly.
            logger.exception("stored settings of tenant %s are invalid; using the file's", tenant)
            found = None
        self._remember(tenant, found, now)
        return found

    def _remember(self, tenant: str, value: TenantOverrides | None, now: float) -> None:
        with self._lock:
            self._cached[tenant] = (now, value)
            self._cached.move_to_end(tenant)
            while len(self._cached) > _MAX_CACHED_TENANTS:
                self._cached.popitem(last=False)

    def for_request(self, tenant: str, agent_id: str | None = None) -> PipelineConfig:
        return self.settings.for_request(tenant, agent_id, stored=self.stored(tenant))

    def webhooks_for(self, tenant: str) -> tuple[Webhook, ...]:
        """The tenant's change-feed endpoints: its stored ones, else the file's (none: ())."""
        stored = self.stored(tenant)
        file = self.settings.tenants.get(tenant)
        merged = stored.over(file) if stored is not None else file
        return (merged.webhooks or ()) if merged is not None else ()

    def settings_for(self, tenant: str) -> Settings:
        """The deployment's settings as this tenant sees them (its stored settings laid over
        the file's): for the code that takes whole `Settings` (replay)."""
        stored = self.stored(tenant)
        if stored is None:
            return self.settings
        merged = stored.over(self.settings.tenants.get(tenant))
        return self.settings.model_copy(
            update={"tenants": {**self.settings.tenants, tenant: merged}}
        )

    def put(self, tenant: str, settings: TenantOverrides, updated_at: str) -> None:
        """Store the tenant's settings whole; this instance sees them at once."""
        if self.store is None:
            raise RuntimeError("this function may not write tenant settings")
        self.store.put(tenant, settings, updated_at)
        self._remember(tenant, settings, self._clock())
