"""The page's HTML with ``assets/js/frame_guard.js`` as the first script of its head: gradio's status tracker
keeps asking for animation frames after the page has loaded (the script says why), and only a script that runs
before gradio's own modules can answer those requests, which gradio's ``head`` option (applied by the app once it
has started) cannot. ASGI middleware; inside gradio's compression, so it sees the page as the template made it."""

from __future__ import annotations

from explorer.page.bodylimit import route_path
from explorer.page.context import js
from explorer.page.held import headers_of, held

SCRIPT = b"<script>" + js("frame_guard.js").encode() + b"</script>"


def guarded(body: bytes) -> bytes:
    """The page with the script first in its head (unchanged if it has no ``<head>``)."""
    return body.replace(b"<head>", b"<head>" + SCRIPT, 1)


def html_page(start: dict) -> bool:
    """An answer the guard rewrites: 200, plain (not yet compressed) HTML."""
    headers = headers_of(start)
    return start["status"] == 200 and b"content-encoding" not in headers and \
        headers.get(b"content-type", b"").startswith(b"text/html")


class FrameGuard:
    """Rewrites a GET of the page (``/``) answered 200 with plain HTML; passes everything else on as it comes."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope.get("type") != "http" or scope.get("method") != "GET" or route_path(scope) != "/":
            return await self.app(scope, receive, send)
        answer = await held(self.app, scope, receive, send, html_page)
        if answer is None:
            return
        start, body = answer[0], guarded(answer[1])
        out = [(k, v) for k, v in start.get("headers") or [] if k != b"content-length"]
        await send({**start, "headers": out + [(b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
