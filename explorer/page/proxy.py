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

An IPv6 client counts as its /48 (``V6_UNIT``): a /64 is one host's, but a home line is given a /56 and a cheap
server a /48, so counted by /64 one subscriber would be 256 to 65 536 clients and could outnumber every other
visitor in the fair queue. A /48 is what a site is given, as one IPv4 address is; visitors behind one unit are
still served session by session (``explorer.page.fair``). An IPv4-mapped IPv6 address (``::ffff:1.2.3.4``) is the
IPv4 address it maps.

The header walk is bounded: its last ``MAX_HEADER`` bytes and ``MAX_HOPS`` entries (the platform adds a few hops;
anything longer was written by the visitor).
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
MAX_HEADER = 1024       # bytes of X-Forwarded-For read, from its right end
MAX_HOPS = 16           # entries walked; past them the peer counts
V6_UNIT = 48            # prefix length of one IPv6 client (see the module's docstring)
POOL_V4, POOL_V6 = 24, 32   # a pool of clients whose waiting requests are bounded together (``explorer.page.fair``)


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
        return unmapped(ipaddress.ip_address(entry))
    except ValueError:
        return None


def unmapped(addr):
    """An IPv4-mapped IPv6 address as the IPv4 address it maps (so a private hop is seen, and clients differ)."""
    return addr.ipv4_mapped if addr.version == 6 and addr.ipv4_mapped is not None else addr


def forwarded_client(peer: str | None, headers: list[bytes]) -> str | None:
    """The right-most ``X-Forwarded-For`` address that is not one of the platform's hops; the peer when every entry
    is a hop or the header is absent. An entry that is no address stops the walk (it cannot be a hop, and what lies
    left of it was written by the visitor): its client is the peer's."""
    raw = b",".join(headers)[-MAX_HEADER:]         # a cut left-most entry is no address: the walk ends there
    entries = raw.decode("latin1").split(",")[-MAX_HOPS:]
    for entry in reversed(entries):
        addr = _address(entry) if len(entry) <= LONGEST else None
        if addr is None:
            return peer
        if not any(addr in net for net in PRIVATE):
            return str(addr)
    return peer


def client_key(host: str | None) -> str:
    """The unit of fairness of an address: itself (an IPv4-mapped one unmapped), or its /48 for IPv6."""
    try:
        addr = unmapped(ipaddress.ip_address(host or ""))
    except ValueError:
        return host or ""
    if addr.version == 6:
        return str(ipaddress.ip_network(f"{addr}/{V6_UNIT}", strict=False))
    return str(addr)


def pool_of(key: str) -> str:
    """The wider unit a client's key belongs to, that bounds a pool of addresses at the fair gate: its IPv4 /24
    or IPv6 /32 (``POOL_V4``, ``POOL_V6``); a key that is no address is its own pool."""
    try:
        net = ipaddress.ip_network(key, strict=False)
    except ValueError:
        return key
    return str(net.supernet(new_prefix=POOL_V4 if net.version == 4 else POOL_V6))


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
