"""Whether a request's client is still there, so that its work stops at the next round when it has gone.

A visitor reads a request's answer through an event stream: the browser's page holds its session's heartbeat
(``/gradio_api/heartbeat/<session>``) and its data stream (``/gradio_api/queue/data?session_hash=<session>``) open
while a run streams, ``gradio_client`` its session's data stream, a plain HTTP caller the event's own stream
(``/gradio_api/call/<api>/<event>``). ``Presence`` (ASGI middleware, ``launch_kwargs``) counts each session's open
streams. A request's client is **gone** when none of its session's streams is open and either one closed after the
request arrived (the client closed its stream) or none has opened within ``GRACE_S`` of its arrival (it never opened
one). gradio itself notices only the next time it sends the stream a message, and then stops calling the handler
without closing it, so the handler's worker would decode on unseen; here the gate holds a request until its
client's stream is open (``confirm``: a request whose client never opens one, or closed it, ends before it waits
or reaches the engine), skips a gone waiter, and the worker (``worker.follow``) stops at its next forward.

Without the middleware, or for a gate given no ``Streams`` (handlers called in-process, the tests' fake requests),
every client is present.
"""

from __future__ import annotations

import asyncio
import contextvars
import re
import time
from collections import Counter, OrderedDict
from typing import Callable
from urllib.parse import parse_qs

GRACE_S = 2.0          # a request's client has this long to open its stream (one opens within milliseconds)
REMEMBERED = 65_536    # sessions whose last close is remembered (the oldest forgotten first; bounded memory)

_HEARTBEAT = re.compile(r"/heartbeat/([^/]+)/?$")
_CALL = re.compile(r"/call/(?:v2/)?[^/]+/([^/]+)/?$")


class Gone(Exception):
    """The request's client has gone: its work stops and nothing more is drawn for it."""


class Streams:
    """Each session's open event streams and when its last one closed (the event loop's thread writes, the
    workers read: single dictionary operations, atomic under the GIL)."""

    def __init__(self):
        self.installed = False
        self.open: Counter = Counter()
        self.closed_at: OrderedDict = OrderedDict()    # session -> time.monotonic() of its last close
        self.watchers: dict = {}                       # session -> futures of requests waiting for its stream

    def opened(self, session: str) -> None:
        self.open[session] += 1
        self._wake(session)

    def closed(self, session: str) -> None:
        self._wake(session)
        self.open[session] -= 1
        if self.open[session] <= 0:
            del self.open[session]
        self.closed_at[session] = time.monotonic()
        self.closed_at.move_to_end(session)
        while len(self.closed_at) > REMEMBERED:
            self.closed_at.popitem(last=False)

    def _wake(self, session: str) -> None:
        for fut in self.watchers.pop(session, ()):
            if not fut.done():
                fut.set_result(None)

    async def change(self, session: str, timeout: float) -> None:
        """Return when ``session``'s streams open or close, or after ``timeout`` seconds (on the event loop,
        which is where the middleware calls ``opened`` and ``closed``: a wait costs no wake-ups meanwhile)."""
        fut = asyncio.get_running_loop().create_future()
        self.watchers.setdefault(session, set()).add(fut)
        try:
            await asyncio.wait({fut}, timeout=max(timeout, 0.0))
        finally:
            left = self.watchers.get(session)
            if left is not None:
                left.discard(fut)
                if not left:
                    del self.watchers[session]

    def present(self, session: str | None, since: float) -> bool:
        """Whether the client of a request of ``session`` that arrived at ``since`` (monotonic) is still there."""
        if not self.installed or not session or self.open.get(session):
            return True
        closed = self.closed_at.get(session)
        if closed is not None and closed >= since:
            return False
        return time.monotonic() - since < GRACE_S


STREAMS = Streams()
PRESENT: contextvars.ContextVar[Callable[[], bool]] = contextvars.ContextVar("unmask_present", default=lambda: True)
ARRIVED: contextvars.ContextVar[float | None] = contextvars.ContextVar("unmask_arrived", default=None)


def watch(streams: Streams | None, session: str | None) -> Callable[[], bool]:
    """The presence test of a request arriving now (always true without ``streams``), also set for the work it
    starts (``worker.follow`` reads it through the context), with the moment it arrived (``arrived``)."""
    t0 = time.monotonic()
    test = (lambda: True) if streams is None else (lambda: streams.present(session, t0))
    PRESENT.set(test)
    ARRIVED.set(t0)
    return test


def arrived() -> float | None:
    """When the request being served arrived (``time.monotonic()``; None outside a request): its budget counts from
    then, its wait for the model included."""
    return ARRIVED.get()


def unopened(streams: Streams | None, session: str | None) -> bool:
    """Whether a request of ``session`` has its client's stream still to wait for (``confirm``)."""
    return streams is not None and streams.installed and bool(session) and not streams.open.get(session)


async def confirm(streams: Streams | None, session: str | None) -> None:
    """Return once the client of the request arriving now has its stream open; ``Gone`` if it closes it first or
    opens none within ``GRACE_S`` (a streamless POST: before, it decoded about two seconds for nobody)."""
    t0 = time.monotonic()
    while unopened(streams, session):
        if not streams.present(session, t0):
            raise Gone("the client left before its request was served")
        await streams.change(session, t0 + GRACE_S - time.monotonic())


def present() -> bool:
    """Whether the client of the request being served is still there (True outside a request)."""
    return PRESENT.get()()


def stream_session(scope) -> str | None:
    """The session an HTTP request's event stream serves, or None when it is no event stream."""
    if scope.get("type") != "http" or scope.get("method") != "GET":
        return None
    path = scope.get("path", "")
    if m := _HEARTBEAT.search(path):
        return m.group(1)
    if path.rstrip("/").endswith("/queue/data"):
        return (parse_qs(scope.get("query_string", b"").decode("latin1")).get("session_hash") or [None])[0]
    if m := _CALL.search(path):
        return call_session(scope, m.group(1))
    return None


def call_session(scope, event_id: str) -> str:
    """The session of a plain call's event (gradio gives a call without a session its event id as session)."""
    app = scope.get("app")
    queue = getattr(app.get_blocks(), "_queue", None) if hasattr(app, "get_blocks") else None
    event = queue.event_ids_to_events.get(event_id) if queue is not None else None
    if event is not None:
        return event.session_hash
    pending = getattr(queue, "pending_event_ids_session", {})
    return next((s for s, ids in pending.items() if event_id in ids), event_id)


class Presence:
    """ASGI middleware: counts each session's open event streams in ``STREAMS`` (a stream ends when its response
    ends, and starlette ends a streaming response as soon as its client disconnects)."""

    def __init__(self, app, streams: Streams = STREAMS):
        self.app, self.streams = app, streams
        streams.installed = True

    async def __call__(self, scope, receive, send):
        session = stream_session(scope)
        if session is None:
            return await self.app(scope, receive, send)
        self.streams.opened(session)
        try:
            await self.app(scope, receive, send)
        finally:
            self.streams.closed(session)
