"""Bytes bounded before they are kept: ASGI middleware in front of every gradio route.

gradio reads a whole request body into memory before looking at it (``queue/join`` takes any size; its
``max_file_size`` covers uploads only), and memory a 100 MB body took is not given back to the system. So:

- a body over ``UNMASK_MAX_BODY`` bytes (default 1 MiB; the page sends a few kB) is refused with a one-line 413:
  by its ``Content-Length`` before a byte is read, and a body without one (chunked) is counted as it streams in and
  cut at the limit (nothing more is read; the route never sees it);
- a body with more than ``MAX_CONTAINERS`` JSON lists and objects is refused with a one-line 400 before gradio
  parses it: every control of the page takes a single value, and a ~1 MB ``[[[...]]]`` cost gradio about 1.5
  CPU-seconds on the server's event loop (parsing, validating, walking it for files) and ~50 MiB kept in the
  session before its own check refused it (``explorer.page.bounds`` checks each value's kind and size after);
- so is a body with more values (commas outside strings) than the widest handler of the app takes plus the
  body's own fields (``BODY_FIELDS``): values past a handler's inputs rode along, 240 000 extra numbers held while
  the request waited;
- both counts are a few passes of the body in C (``count``), linear whatever it holds, and off the event loop for a
  body over ``LARGE`` bytes: the regular expression that stripped strings before backtracked on a string that
  never closes (``"`` then ``\\"`` repeated), quadratic: 64 KiB froze every request for 12.4 s (issue 74);
- ``POST .../upload`` is refused (405): the page has no upload control and the API takes text only, so gradio's
  upload route would only let a visitor fill the disk;
- only the routes the page and its API use answer (``ROUTES``); every other route gradio serves is refused (404,
  one line) before gradio sees it: ``process_recording`` stored and echoed a file and ran ``ffmpeg`` once per
  effect it was sent, and the rest (monitoring, proxying, login, streaming media, the editing assistant, run
  history, component servers, the OpenAPI schema) are features this app does not use. ``tests/test_bytes.py``
  walks gradio's route table and sends each route through this middleware.
"""

from __future__ import annotations

import asyncio
import re
from typing import NamedTuple

import numpy as np

from engine import settings

TOO_LARGE = "request body over {limit} bytes (UNMASK_MAX_BODY): refused"
NO_UPLOADS = "this app takes no uploads"
NOT_A_ROUTE = "not a route of this app"
TOO_NESTED = "a request of more than {n} lists and objects: every field of this app takes a single value"
TOO_MANY = "a request of more than {n} values: no handler of this app takes that many"
MAX_CONTAINERS = 64            # the page's requests have a few (the body, its data, an event's index)
# commas a body has beside its handler's values: its fields (event_data, fn_index, trigger_id, session_hash) and
# an event's data (the scrubber's has a step, a position, a number and the ids of the views shown, under 20)
BODY_FIELDS = 64
LARGE = 64 << 10               # bytes of a body checked in a thread, not on the event loop
QUOTE, LIST, OBJECT, COMMA = b'"[{,'

# (methods, path) of the routes the page (gradio's JavaScript client) and the API (gradio_client, raw HTTP) use
_GET = ("GET", "HEAD")
ROUTES = [(_GET, re.compile(p)) for p in (
    r"/", r"/config/?", r"/favicon\.ico", r"/theme\.css", r"/robots\.txt", r"/manifest\.json",
    r"/(assets|static|svelte)/.+",                        # the page's own scripts, styles and fonts
    r"/gradio_api/info/?", r"/gradio_api/app_id/?", r"/gradio_api/startup-events", r"/gradio_api/theme\.css",
    r"/gradio_api/heartbeat/[^/]+", r"/gradio_api/queue/data",
    r"/gradio_api/call/[^/]+/[^/]+",                    # a call's event stream
    r"/gradio_api/file=.+")] + [(("POST",), re.compile(p)) for p in (     # files a handler returned
    r"/gradio_api/queue/join", r"/gradio_api/cancel", r"/gradio_api/reset/?", r"/gradio_api/call/[^/]+/?")]


def route_path(scope) -> str:
    """The request's path below any ``root_path`` (a proxy's prefix): the app's own route."""
    path, root = scope.get("path", ""), scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root):] or "/"
    return path


def allowed(scope) -> bool:
    """The request's method and path are those of a route the app uses."""
    method, path = scope.get("method", ""), route_path(scope)
    return any(method in methods and pattern.fullmatch(path) for methods, pattern in ROUTES)


def is_upload(scope) -> bool:
    return scope.get("method") == "POST" and scope.get("path", "").rstrip("/").endswith("/upload")


async def refuse(send, status: int, text: str) -> None:
    body = (text + "\n").encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()), (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


def declared_length(scope) -> int | None:
    for k, v in scope.get("headers", ()):
        if k == b"content-length":
            try:
                return int(v)
            except ValueError:
                return None          # uvicorn refuses a malformed length before the app sees it
    return None


class BodyLimit:
    """ASGI middleware: see the module's docstring."""

    def __init__(self, app, limit: int | None = None, max_values: int | None = None):
        self.app = app
        self.limit = limit if limit is not None else settings.get("UNMASK_MAX_BODY")
        self.max_values = max_values       # None: read from the app at the first request (``most_values``)

    async def __call__(self, scope, receive, send):
        if scope.get("type") != "http":
            return await self.app(scope, receive, send)
        if is_upload(scope):
            return await refuse(send, 405, NO_UPLOADS)
        if not allowed(scope):
            return await refuse(send, 404, NOT_A_ROUTE)
        if (declared_length(scope) or 0) > self.limit:
            return await refuse(send, 413, TOO_LARGE.format(limit=self.limit))
        if scope.get("method") != "POST":            # the allowed GET routes read no body
            return await self.app(scope, receive, send)
        body = await read_body(receive, self.limit)
        if body is None:                             # cut at the limit: nothing more is read
            return await refuse(send, 413, TOO_LARGE.format(limit=self.limit))
        # a few ms for 1 MiB, but the event loop serves every visitor: a large body is counted in a thread
        n = await asyncio.to_thread(count, body) if len(body) > LARGE else count(body)
        if n.containers > MAX_CONTAINERS:
            return await refuse(send, 400, TOO_NESTED.format(n=MAX_CONTAINERS))
        most = self.most_values(scope)
        if most is not None and n.commas > most:
            return await refuse(send, 400, TOO_MANY.format(n=most))
        await self.app(scope, replay(body, receive), send)

    def most_values(self, scope) -> int | None:
        """Commas a body may have: the widest handler's inputs of the gradio app serving it (starlette puts the app
        in the scope) plus the body's own fields; None outside a gradio app (nothing to count against)."""
        if self.max_values is None:
            blocks = getattr(scope.get("app"), "get_blocks", None)
            if blocks is None:
                return None
            self.max_values = max((len(fn.inputs) for fn in blocks().fns.values()), default=0) + BODY_FIELDS
        return self.max_values


async def read_body(receive, limit: int) -> bytes | None:
    """The whole body (a chunked one counted as it streams in), or None past ``limit`` bytes or if the client
    left."""
    parts, read = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        parts.append(message.get("body", b""))
        read += len(parts[-1])
        if read > limit:
            return None
        if not message.get("more_body"):
            return b"".join(parts)


def replay(body: bytes, receive):
    """The route's ``receive``: the body read here, then the client's own messages (its leaving)."""
    sent = False

    async def again():
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}
    return again


class Count(NamedTuple):
    containers: int      # JSON arrays and objects
    commas: int          # separators of values (and of an object's fields)


def count(body: bytes) -> Count:
    """The body's lists, objects and commas outside its JSON strings, in a few C passes: linear whatever the body
    holds (1 MiB in about 6 ms). Escapes go first: escaped backslashes (so a string ending in one keeps its closing
    quote), then escaped quotes (a backslash left escapes no quote), so every quote left opens or closes a string;
    a byte is inside a string when an odd number of quotes precede it, and a string that never closes takes the
    rest of the body with it (a JSON parser stops at it before reading its content)."""
    bare = np.frombuffer(body.replace(b"\\\\", b"").replace(b'\\"', b""), np.uint8)       # (n,)
    # the running count of quotes, mod 256: its parity is all that is read
    outside = (np.cumsum(bare == QUOTE, dtype=np.uint8) & 1) == 0                     # (n,)
    return Count(int(np.count_nonzero(outside & ((bare == LIST) | (bare == OBJECT)))),
                 int(np.count_nonzero(outside & (bare == COMMA))))
