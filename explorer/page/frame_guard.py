"""The page's HTML with ``assets/js/frame_guard.js`` as the first script of its head: gradio's status tracker
keeps asking for animation frames after the page has loaded (the script says why), and only a script that runs
before gradio's own modules can answer those requests, which gradio's ``head`` option (applied by the app once it
has started) cannot. ASGI middleware; inside gradio's compression, so it sees the page as the template made it."""

from __future__ import annotations

from explorer.page.bodylimit import route_path
from explorer.page.context import js

SCRIPT = b"<script>" + js("frame_guard.js").encode() + b"</script>"


def guarded(body: bytes) -> bytes:
    """The page with the script first in its head (unchanged if it has no ``<head>``)."""
    return body.replace(b"<head>", b"<head>" + SCRIPT, 1)


class FrameGuard:
    """Rewrites a GET of the page (``/``) answered 200 with plain HTML; passes everything else on as it comes."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope.get("type") != "http" or scope.get("method") != "GET" or route_path(scope) != "/":
            return await self.app(scope, receive, send)
        start, parts = None, []

        async def capture(message):
            nonlocal start
            if message["type"] == "http.response.start":
                start = message
            else:
                parts.append(message)
        await self.app(scope, receive, capture)
        headers = dict(start.get("headers") or [])
        if start["status"] != 200 or b"content-encoding" in headers or \
                not headers.get(b"content-type", b"").startswith(b"text/html"):
            for message in (start, *parts):
                await send(message)
            return
        body = guarded(b"".join(m.get("body", b"") for m in parts if m["type"] == "http.response.body"))
        out = [(k, v) for k, v in start.get("headers") or [] if k != b"content-length"]
        await send({**start, "headers": out + [(b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
