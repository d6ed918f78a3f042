"""Who a request comes from: the unit of fair queueing (``explorer.page.fair``).

Two rules, chosen when the app starts (``mode()``):

- **named proxies** (anywhere ``UNMASK_TRUSTED_PROXIES`` is set, and the default off a Space, where it is empty): the
  socket's address, or ``X-Forwarded-For``'s only when the peer is one of the named proxies (uvicorn's own proxy
  handling, ``FORWARDED_ALLOW_IPS``). By default no peer is trusted, so a forged header changes nothing.
- **a Hugging Face Space** (the platform sets ``SPACE_ID``, and ``UNMASK_TRUSTED_PROXIES`` is empty): every visitor
  arrives through the platform's proxy, which appends the address it saw to ``X-Forwarded-For``. ``SpaceClient``
  (ASGI middleware) takes the right-most address of that header that is not a private or loopback address (the
  platform's own hops), as uvicorn does for a trusted hop. A visitor can only *prepend* to the header, so forged
  addresses change nothing.

An IPv6 client counts as its /64 (one host's privacy addresses are one visitor).
"""

from __future__ import annotations

import ipaddress
import os

from engine import settings

# the platform's own hops: private, shared (carrier-grade NAT), link-local and loopback ranges
PRIVATE = tuple(ipaddress.ip_network(n) for n in (
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16", "127.0.0.0/8",
    "fc00::/7", "fe80::/10", "::1/128"))
LONGEST = 64            # a header entry longer than this is no address


def on_space() -> bool:
    return bool(os.environ.get("SPACE_ID"))


def mode() -> str:
    """"space" on a Space whose operator named no proxy, else "named" (uvicorn's rule)."""
    return "space" if on_space() and not settings.get("UNMASK_TRUSTED_PROXIES") else "named"


def forwarded_allow_ips() -> str:
    """What uvicorn's own proxy handling trusts: the named proxies (none by default; on a Space ``SpaceClient``
    does the work instead)."""
    return settings.get("UNMASK_TRUSTED_PROXIES")


def _address(entry: str):
    """An ``X-Forwarded-For`` entry as an address (its port and brackets dropped), or None."""
    entry = entry.strip()
    if entry.startswith("[") and "]" in entry:
        entry = entry[1:entry.index("]")]
    elif entry.count(":") == 1:
        entry = entry.split(":")[0]
    try:
        return ipaddress.ip_address(entry)
    except ValueError:
        return None


def forwarded_client(peer: str | None, headers: list[bytes]) -> str | None:
    """The right-most ``X-Forwarded-For`` address that is not one of the platform's hops; the peer when every entry
    is a hop or the header is absent. An entry that is no address stops the walk (it cannot be a hop, and what lies
    left of it was written by the visitor): its client is the peer's."""
    entries = [e for h in headers for e in h.decode("latin1").split(",")]
    for entry in reversed(entries):
        addr = _address(entry) if len(entry) <= LONGEST else None
        if addr is None:
            return peer
        if not any(addr in net for net in PRIVATE):
            return str(addr)
    return peer


def client_key(host: str | None) -> str:
    """The unit of fairness of an address: itself, or its /64 for IPv6."""
    try:
        addr = ipaddress.ip_address(host or "")
    except ValueError:
        return host or ""
    if addr.version == 6:
        return str(ipaddress.ip_network(f"{addr}/64", strict=False))
    return str(addr)


class SpaceClient:
    """ASGI middleware for a Space: the request's client becomes ``forwarded_client`` of its headers."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope.get("type") in ("http", "websocket"):
            values = [v for k, v in scope.get("headers", ()) if k == b"x-forwarded-for"]
            peer = (scope.get("client") or (None, 0))
            host = forwarded_client(peer[0], values) if values else peer[0]
            if host != peer[0]:
                scope = dict(scope, client=(host, 0))
        return await self.app(scope, receive, send)
