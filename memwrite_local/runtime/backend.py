"""What every local backend does: set the handlers' environment for as long as it is entered.

A backend (`LocalSqlite`, the embedded default, or `LocalAws`, moto) sets the variables the
handlers read (`memwrite.config.environment.LambdaEnvironment`) and restores them on exit; the local
runner and the handlers then pick their adapters through `memwrite.wiring` as on AWS.
API keys: those configured (`MEMWRITE_API_KEYS`, `api_keys` in the config file) and those the
backend stores (`memwrite keys create --data-dir`); when there are none, the one default key
`local-dev-key` (tenant `local`): a configured or created key replaces the default.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from types import TracebackType
from typing import Self

from memwrite.auth.api_keys import DEFAULT_KEY_ENV
from memwrite.config.settings import load_settings

__all__ = ["LOCAL_API_KEY", "LOCAL_TENANT", "LocalBackend", "patched_environ"]

LOCAL_API_KEY = "local-dev-key"
LOCAL_TENANT = "local"


@contextmanager
def patched_environ(values: dict[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class LocalBackend(ABC):
    """Context manager: the backend started and the handlers' environment pointing at it."""

    description: str  # for banners: what plays AWS

    def __init__(self, extra_env: dict[str, str] | None = None) -> None:
        self._extra_env = extra_env or {}
        self._stack = ExitStack()
        self.uses_default_api_key = False

    def __enter__(self) -> Self:
        base_env = {
            "POWERTOOLS_TRACE_DISABLED": "true",
            # EMF lines would flood a terminal; tests that check them turn metrics back on.
            "POWERTOOLS_METRICS_DISABLED": "true",
        }
        configured = load_settings({**os.environ, **self._extra_env}).api_keys
        if not configured and not self._has_stored_keys():
            # Valid until the first key is created (the authorizer re-checks within its
            # cache period, `memwrite.auth.api_keys.KEY_CACHE_SECS`).
            base_env[DEFAULT_KEY_ENV] = f"{LOCAL_API_KEY}={LOCAL_TENANT}"
            self.uses_default_api_key = True
        try:
            self._stack.enter_context(patched_environ({**base_env, **self._extra_env}))
            self._stack.enter_context(patched_environ(self._start(self._stack)))
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stack.close()

    def _has_stored_keys(self) -> bool:
        """Whether the backend's key table holds a key already (a fresh backend: no)."""
        return False

    @abstractmethod
    def _start(self, stack: ExitStack) -> dict[str, str]:
        """Start what plays AWS (its cleanup pushed on `stack`); the handlers' variables."""
