"""One webhook attempt: a tenant's webhook (`url`, `secret`, `events`) gets an event as an
HTTPS POST, its raw JSON body signed (`X-Memwrite-Signature: sha256=<hex HMAC-SHA256 of the
body with the secret>`) and carrying its event id (`X-Memwrite-Event-Id`, for dedupe: delivery
is at least once). Any 2xx accepts it; anything else (no answer, a timeout, another status) is
a failed attempt, which the delivery lane (`memwrite.feed.delivery`) retries through its queue.

The host is resolved again at each attempt (its DNS may have changed since the settings were
stored) and the connection goes to the address just checked (`memwrite.guards.egress`), never to an
internal one; redirects are not followed, so a public host cannot bounce the POST inside.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Iterable
from dataclasses import dataclass

import httpcore
import httpx

from memwrite.config.tenant_overrides import Webhook
from memwrite.guards.egress import loopback_allowed, resolve_checked
from memwrite.ids import content_hash
from memwrite.records.change_events import ChangeEvent

__all__ = [
    "EVENT_ID_HEADER",
    "SIGNATURE_HEADER",
    "TIMEOUT_SECS",
    "AttemptResult",
    "RefusedAddress",
    "Webhook",
    "checked_client",
    "hook_id",
    "host_refusal",
    "post_event",
    "sign",
]

SIGNATURE_HEADER = "X-Memwrite-Signature"
EVENT_ID_HEADER = "X-Memwrite-Event-Id"
TIMEOUT_SECS = 5.0


def sign(secret: str, body: bytes) -> str:
    """`sha256=<hex>`: HMAC-SHA256 of the raw body with the webhook's secret."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def hook_id(url: str) -> str:
    """A webhook's id: its URL's hash (a queued delivery names its webhook by it, never by the
    URL or the secret, which are read from the tenant's settings when the attempt is made)."""
    return content_hash("webhook", url)


@dataclass(frozen=True)
class AttemptResult:
    status: int | None  # None: no answer (transport error or timeout)
    latency_ms: float
    error: str | None = None  # the transport error's type name

    @property
    def delivered(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


class RefusedAddress(httpcore.ConnectError):
    """The webhook's host resolved to an address webhooks may not reach: no connection."""


class _CheckedBackend(httpcore.SyncBackend):
    """Resolves the host, checks every address, and connects to a checked one (TLS still
    verifies the certificate for the host name: httpcore passes it as the server name)."""

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        try:
            addresses = resolve_checked(host, port, allow_loopback=loopback_allowed())
        except ValueError as exc:
            raise RefusedAddress(str(exc)) from exc
        except OSError as exc:
            raise httpcore.ConnectError(f"{host} does not resolve: {exc}") from exc
        return super().connect_tcp(str(addresses[0]), port, timeout, local_address, socket_options)


class _CheckedTransport(httpx.HTTPTransport):
    """httpx's own transport, its connection pool on the checking backend."""

    def __init__(self) -> None:
        super().__init__(trust_env=False)
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(), network_backend=_CheckedBackend()
        )


def host_refusal(hook: Webhook) -> str | None:
    """Why the webhook's host, resolved now, may not be reached, or None. A name that does not
    resolve now passes: each delivery resolves it again and checks before connecting."""
    url = httpx.URL(str(hook.url))
    try:
        resolve_checked(url.host, url.port or 443, allow_loopback=loopback_allowed())
    except ValueError as exc:
        return str(exc)
    except OSError:
        return None
    return None


def checked_client() -> httpx.Client:
    """The client deliveries go through: checked addresses only, no redirects, no proxy from
    the environment (a proxy would connect to the host unchecked)."""
    return httpx.Client(transport=_CheckedTransport(), follow_redirects=False, trust_env=False)


def post_event(event: ChangeEvent, hook: Webhook, client: httpx.Client) -> AttemptResult:
    """POST `event` to `hook` once, signed with its secret; waits at most `TIMEOUT_SECS`."""
    body = event.model_dump_json().encode()
    headers = {
        "Content-Type": "application/json",
        SIGNATURE_HEADER: sign(hook.secret, body),
        EVENT_ID_HEADER: event.event_id,
    }
    started = time.perf_counter()
    try:
        response = client.post(
            str(hook.url),
            content=body,
            headers=headers,
            timeout=TIMEOUT_SECS,
            follow_redirects=False,  # a 3xx is a failed attempt, never followed
        )
    except httpx.HTTPError as exc:
        error = (
            "RefusedAddress" if isinstance(exc.__cause__, RefusedAddress) else type(exc).__name__
        )
        return AttemptResult(None, (time.perf_counter() - started) * 1000, error)
    return AttemptResult(response.status_code, (time.perf_counter() - started) * 1000)
