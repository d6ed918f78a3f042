"""The page's built scripts and styles (gradio's ``/assets/``, content-hashed file names) served from memory,
compressed once.

Every page open fetches about 93 of them. Gradio reads each file in chunks on worker threads and compresses it again
on every request (its brotli middleware): 0.8 of the server's 0.9 CPU-seconds per page open (py-spy), so a class of
40 opening the page together keeps both cores of a small Space busy for about 16 s, and every bystander waits. Here
the first request for an asset reads and compresses it, and every later one gets the same bytes from memory (gradio's
middleware passes on a response that is already encoded). Only what cannot change while the process runs is kept: a
plain GET under ``/assets/`` (no Range, no conditional header) answered 200, each at most ``MAX_ONE`` bytes and
``MAX_ALL`` in all; anything else goes through untouched.
"""

from __future__ import annotations

import asyncio
import gzip

import brotli

from explorer.page.bodylimit import route_path
from explorer.page.held import headers_of, held

PREFIX = "/assets/"
MAX_ONE, MAX_ALL = 8 << 20, 64 << 20     # bytes before compression: gradio's largest script is about 4 MiB
QUALITY = 5                              # brotli's; made once per asset, so a little denser than gradio's 4
PASSED = (b"content-type", b"etag", b"last-modified")    # the original answer's headers a kept copy repeats


def encoding(scope) -> str | None:
    """The encoding a request for a kept asset gets (br, gzip or identity); None: not one to keep."""
    if scope.get("type") != "http" or scope.get("method") != "GET" or not route_path(scope).startswith(PREFIX):
        return None
    headers = dict(scope.get("headers") or [])
    if any(h in headers for h in (b"range", b"if-none-match", b"if-modified-since", b"if-range")):
        return None
    accept = headers.get(b"accept-encoding", b"").decode("latin-1")
    return "br" if "br" in accept else "gzip" if "gzip" in accept else "identity"


def compressed(body: bytes, how: str) -> bytes:
    if how == "br":
        return brotli.compress(body, quality=QUALITY)
    return gzip.compress(body, 6) if how == "gzip" else body


class AssetCache:
    """ASGI middleware: see the module's docstring."""

    def __init__(self, app):
        self.app, self.kept, self.total = app, {}, 0     # (path, encoding) -> (headers, body)

    async def __call__(self, scope, receive, send):
        how = encoding(scope)
        if how is None:
            return await self.app(scope, receive, send)
        key = (scope["path"], how)
        if key not in self.kept:
            return await self.fill(key, scope, receive, send)
        headers, body = self.kept[key]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def fill(self, key, scope, receive, send):
        """The app answers; a whole 200 answer small enough is compressed (off the event loop), kept and sent, any
        other answer is passed on as it comes."""
        def small(start: dict) -> bool:
            headers = headers_of(start)
            size = int(headers.get(b"content-length", b"-1") or -1)
            return start["status"] == 200 and b"content-encoding" not in headers and \
                0 <= size <= MAX_ONE and self.total + size <= MAX_ALL
        answer = await held(self.app, scope, receive, send, small)
        if answer is None:
            return
        start, plain = answer
        body = await asyncio.to_thread(compressed, plain, key[1])
        headers = [(k, v) for k, v in start.get("headers") or [] if k in PASSED]
        headers += [(b"content-length", str(len(body)).encode()), (b"vary", b"Accept-Encoding")]
        if key[1] != "identity":
            headers.append((b"content-encoding", key[1].encode()))
        if key not in self.kept:
            self.kept[key], self.total = (headers, body), self.total + len(plain)
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})
