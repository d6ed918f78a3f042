"""An ASGI answer held whole when its start message says so, else passed on as it comes. The page's HTML rewritten
(``frame_guard``) and the assets kept (``assets_cache``) both hold the answers they change; neither may hold one
it will not change (a stream, a large file, an error page), which the start message alone tells."""

from __future__ import annotations


async def held(app, scope, receive, send, hold) -> tuple[dict, bytes] | None:
    """Runs ``app``. An answer whose start message ``hold(start)`` accepts is returned as (start, body), unsent;
    any other is passed on to ``send`` message by message, and None is returned."""
    start, parts, keep = None, [], False

    async def capture(message):
        nonlocal start, keep
        if message["type"] == "http.response.start":
            start, keep = message, hold(message)
            if not keep:
                await send(message)
        elif keep:
            parts.append(message.get("body", b""))
        else:
            await send(message)
    await app(scope, receive, capture)
    return (start, b"".join(parts)) if keep else None


def headers_of(start: dict) -> dict:
    """A start message's headers by (lower-case, bytes) name."""
    return dict(start.get("headers") or [])
