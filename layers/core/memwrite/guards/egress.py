"""Where memwrite's own requests may go: a tenant's webhook reaches only public addresses.

A webhook URL names a host a tenant chose, and memwrite's functions POST to it: aimed at a
loopback, private, link-local, multicast or reserved address (the metadata service at
169.254.169.254, the Lambda runtime API on 127.0.0.1:9001, a VPC's 10.x hosts) it would make
memwrite send requests inside (server-side request forgery). So an IP literal is read the way
the C resolver reads it (`inet_aton`: `127.1`, `0x7f000001`, `2130706433`, `017700000001`),
an IPv6 address that carries an IPv4 one (IPv4-mapped, 6to4, NAT64, Teredo) is judged by the
IPv4 one, and an address passes only when `ipaddress` calls it global and it is not multicast.
A name is resolved (`socket.getaddrinfo`) when the settings are stored and again at each
delivery, where the connection goes to the address just checked (`memwrite.feed.webhooks`).

Loopback (`http` included) is allowed only by the deployment: `memwrite serve` sets
`MEMWRITE_LOOPBACK_WEBHOOKS=true` for development; a tenant's setting cannot, and inside a
Lambda function (`AWS_LAMBDA_FUNCTION_NAME` set) the flag is ignored (docs/design.md §7).
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Mapping

__all__ = [
    "LOOPBACK_FLAG",
    "IpAddress",
    "address_refusal",
    "ip_literal",
    "loopback_allowed",
    "resolve_checked",
    "url_refusal",
]

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

LOOPBACK_FLAG = "MEMWRITE_LOOPBACK_WEBHOOKS"
_LAMBDA_MARKER = "AWS_LAMBDA_FUNCTION_NAME"  # set by the Lambda runtime in every function
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_LOCALHOST_NAMES = ("localhost", ".localhost")  # RFC 6761: always the loopback


def loopback_allowed(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this deployment lets webhooks reach the loopback (development only)."""
    env = os.environ if environ is None else environ
    return env.get(LOOPBACK_FLAG, "").lower() == "true" and _LAMBDA_MARKER not in env


def ip_literal(host: str) -> IpAddress | None:
    """The address `host` spells, or None when it is a name. IPv4 is read with `inet_aton`
    semantics (octal, hex, decimal and 1-3 part forms), as the resolver would connect."""
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        return ipaddress.ip_address(bare)
    except ValueError:
        pass
    if not bare or not all(c.isalnum() or c == "." for c in bare):
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(bare))
    except OSError:
        return None


def _carried_ipv4(ip: IpAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one delivers to, when it carries one."""
    if isinstance(ip, ipaddress.IPv4Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFF_FFFF)
    return None


def address_refusal(ip: IpAddress, *, allow_loopback: bool) -> str | None:
    """Why `ip` may not be a webhook's address, or None when it may."""
    carried = _carried_ipv4(ip)
    if carried is not None:
        return address_refusal(carried, allow_loopback=allow_loopback)
    if ip.is_loopback:
        return None if allow_loopback else f"{ip} is a loopback address"
    if ip.is_multicast:
        return f"{ip} is a multicast address"
    if ip.is_link_local:
        return f"{ip} is a link-local address"
    if ip.is_private or ip.is_reserved or not ip.is_global:
        return f"{ip} is a private or reserved address"
    if isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local:
        return f"{ip} is a site-local address"
    return None


def _is_localhost(host: str) -> bool:
    name = host.lower().rstrip(".")
    return name == _LOCALHOST_NAMES[0] or name.endswith(_LOCALHOST_NAMES[1])


def url_refusal(scheme: str, host: str, *, allow_loopback: bool) -> str | None:
    """Why a webhook URL is refused before any resolution, or None: `https` to a name or a
    public address; `http` or `https` to the loopback only when the deployment allows it."""
    if scheme not in {"https", "http"}:
        return "must be an https URL"
    ip = ip_literal(host)
    loopback = _is_localhost(host) or (ip is not None and ip.is_loopback)
    if ip is not None and not loopback:
        carried = _carried_ipv4(ip)
        loopback = carried is not None and carried.is_loopback
    if loopback:
        if allow_loopback:
            return None
        return f"{host} is a loopback address: webhooks go only to public addresses"
    if ip is not None:
        reason = address_refusal(ip, allow_loopback=False)
        if reason is not None:
            return f"{reason}: webhooks go only to public addresses"
    if scheme == "http":
        return "must be an https URL (http only to the loopback, where the deployment allows)"
    return None


def resolve_checked(host: str, port: int, *, allow_loopback: bool) -> list[IpAddress]:
    """Every address `host` resolves to, each checked; `ValueError` naming the first refused
    (one internal address among public ones refuses the name: a resolver answers in any
    order). `OSError` when the name does not resolve."""
    literal = ip_literal(host)
    if literal is not None:
        addresses: list[IpAddress] = [literal]
    else:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    for ip in addresses:
        reason = address_refusal(ip, allow_loopback=allow_loopback)
        if reason is not None:
            raise ValueError(f"{host} resolves to {reason}")
    return list(dict.fromkeys(addresses))
