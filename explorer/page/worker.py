"""Model work for a request, run so that it stops when the request does (engine work never runs on unseen).

``follow(produce, budget_s)`` runs ``produce(should_stop)`` (an iterator: one value per forward, or per finished
problem) in a worker thread and yields its newest value at most every ``interval`` seconds, dropping the ones in
between: the engine runs at its own pace and the page shows the latest state. The handlers that use it are async
generators, so gradio's Stop, ``/cancel`` and a client that went away reach them as ``CancelledError`` or
``aclose()``: ``follow`` then tells the worker to stop and *awaits* it before the request ends, so a request's
concurrency slot is freed only once its work has stopped. ``budget_s`` bounds the whole request's wall time,
whatever spends it (forwards, rendering between them, cache reads): past it the worker is stopped and the last
value comes back flagged with ``Followed.limit``. When the request's client has gone (``explorer.page.presence``)
the worker stops at its next forward and ``follow`` raises ``Gone``: nothing more is drawn for it.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from explorer.page import fair, presence
from explorer.page.presence import Gone

INTERVAL_S = 0.25       # at most four frames a second reach the browser while a run streams
# The workers wait on the engine loop most of the time: they get their own threads, so a class's worth of streaming
# runs never holds the threads that draw figures (``in_thread``: asyncio's default executor, a few threads).
WORKERS = ThreadPoolExecutor(max_workers=96, thread_name_prefix="unmask-follow")
# Drawing is Python under the GIL: more threads than this draw no faster, and each one more that wants the GIL delays
# the event loop's next turn by up to a switch interval (5 ms), which a class's worth of Runs drawing at once made
# a stall (``tests/test_page_drawing.py``).
DRAWING = ThreadPoolExecutor(max_workers=2, thread_name_prefix="unmask-draw")


@dataclass
class Followed:
    value: object             # the newest value the worker produced
    final: bool               # the worker has finished: this is its last value
    limit: str | None = None  # which limit stopped it early (None: it ran to its end)


def wall_limit(budget_s: float, elapsed_s: float) -> str:
    return (f"stopped after {elapsed_s:.1f} s, to end within the time budget of {budget_s:g} s per request "
            f"(wall time, drawing included; UNMASK_MAX_SECONDS)")


async def follow(produce: Callable[[Callable[[], bool]], Iterator], budget_s: float | None,
                 interval: float = INTERVAL_S, heartbeat: bool = False, started: float | None = None,
                 reserve: Callable[[], float] = lambda: 0.0) -> AsyncIterator[Followed]:
    """See the module's docstring. ``heartbeat``: also yield (the newest value, possibly None) on every tick
    without a new value, for handlers that report progress kept elsewhere. ``started``: when the request began
    (``time.monotonic()``; default: when it arrived at the fair gate, ``presence.arrived``). ``reserve()``: seconds
    the caller still needs after the last value (its final drawing): the worker is stopped that much before the
    budget ends."""
    stop, box, lock = threading.Event(), {"value": None, "fresh": False, "error": None}, threading.Lock()
    here = presence.PRESENT.get()                 # the request's client is still there (``explorer.page.presence``)
    should_stop = lambda: stop.is_set() or not here()  # noqa: E731  (asked between forwards: a gone client's work
    #                                                    leaves the engine loop at its next round)

    def work():
        try:
            for value in produce(should_stop):
                with lock:
                    box.update(value=value, fresh=True)
                if stop.is_set():
                    break
        except BaseException as e:     # handed to the request: a UserError is shown, anything else re-raised
            box["error"] = e

    # by default the budget counts from the request's arrival, its wait at the fair gate included
    t0 = started if started is not None else presence.arrived() or time.monotonic()
    if budget_s is not None and time.monotonic() - t0 > budget_s - reserve():   # spent before it began: no work
        yield Followed(None, final=True, limit=wall_limit(budget_s, time.monotonic() - t0))
        return
    if not here():
        raise Gone("the client left before its work began")   # nothing reaches the engine for it
    # the request's context (its client, explorer.page.fair) goes with it into the worker
    worker = asyncio.get_running_loop().run_in_executor(WORKERS, contextvars.copy_context().run, work)
    limit = None
    try:
        while not worker.done() and here():
            left = budget_s - reserve() - (time.monotonic() - t0) if budget_s is not None else interval
            await asyncio.wait({worker}, timeout=min(interval, max(left, 0.01)))   # wake at the deadline
            if budget_s is not None and limit is None and time.monotonic() - t0 > budget_s - reserve():
                limit = wall_limit(budget_s, time.monotonic() - t0)
                stop.set()
            with lock:
                fresh, value, box["fresh"] = box["fresh"], box["value"], False
            if (fresh or heartbeat) and not worker.done() and limit is None:
                yield Followed(value, final=False)
        if not here():
            raise Gone("the client left")            # nothing more is drawn for it (``finally`` stops the worker)
        if box["error"] is not None:
            raise box["error"]
        yield Followed(box["value"], final=True, limit=limit)
    finally:
        stop.set()
        await asyncio.shield(worker)     # the slot is released only after the worker has stopped


FINAL_RESERVE_S = 0.5   # at least this much of a request's budget is kept for its last drawing (and the
#                         browser's: a run's final frame draws every view of its tab, ~3-4 of its frames)


FRAME_SHARE = 0.25      # the streamed frames of every run together take at most this share of the drawing's time


class Streaming:
    """How many runs stream frames now: each run's frames are spaced by their number (``DrawClock.frame_due``)."""

    def __init__(self):
        self.n, self._lock = 0, threading.Lock()

    def __enter__(self):
        with self._lock:
            self.n += 1

    def __exit__(self, *exc):
        with self._lock:
            self.n -= 1


STREAMING = Streaming()


class DrawClock:
    """How long a handler's drawing takes, so that ``follow`` stops the work early enough for the last drawing to
    end within the budget: ``reserve()`` is four times the newest drawing (at least FINAL_RESERVE_S, at most half
    the budget); ``draw(fn, *args)`` draws off the event loop and times it (its wait for a drawing thread
    included: a busy server's drawing is slower); ``frame_due()`` says whether a streamed frame is due.
    ``expected_s``: the drawing a handler that draws only once, at the end, must reserve before it has timed any."""

    def __init__(self, budget_s: float | None, expected_s: float = 0.0):
        self.budget_s, self.last_s, self.drawn_at = budget_s, expected_s, float("-inf")

    def reserve(self) -> float:
        return min(max(FINAL_RESERVE_S, 4 * self.last_s), (self.budget_s or 0.0) / 2)

    def frame_due(self) -> bool:
        """This run's next streamed frame is due: its last one ended INTERVAL_S ago, and long enough ago that if
        every streaming run drew a frame as slow as it every so often, their frames would take FRAME_SHARE of the
        time. Alone a run shows four frames a second; forty at once each show one every few seconds, and the
        rest of the time goes to their decodes and last drawings (issue 74: a class of 40 page Runs spent it
        drawing frames nobody had time to see). The first frame is drawn at once; the last drawing always."""
        gap = max(INTERVAL_S, STREAMING.n * self.last_s / FRAME_SHARE)
        return time.monotonic() - self.drawn_at >= gap

    async def draw(self, fn, *args):
        t0 = time.monotonic()
        out = await in_thread(fn, *args)
        self.drawn_at = time.monotonic()
        self.last_s = self.drawn_at - t0
        return out


async def in_thread(fn, *args):
    """CPU work of a handler (rendering figures, reading the trace cache) off the event loop, so other requests
    keep being served. Its time is charged to the request's flow (``fair.charge``), in the ledger its engine time
    goes to: a page Run's drawing is part of what it costs, and the fair share counts it."""
    def timed():
        t0 = time.perf_counter()
        try:
            return fn(*args)
        finally:
            fair.charge(time.perf_counter() - t0)
    return await asyncio.get_running_loop().run_in_executor(DRAWING, contextvars.copy_context().run, timed)
