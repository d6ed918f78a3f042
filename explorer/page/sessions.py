"""Sessions that go quiet are let go, heartbeat or not, and no session grows with its Runs.

gradio keeps a session's state (its copy of the page's configuration and every ``gr.State``) until the browser's
heartbeat stops, and a raw-HTTP client has no heartbeat: without this, a script opening sessions could keep them
all until the capacity cap evicts the oldest. A sweeper task drops every session no event has used for
``UNMASK_SESSION_IDLE_S`` seconds (default 600). A visitor back after that sees their page as it was (scrubbing
runs in the browser); Branch, which needs the server's copy of the run, asks for a run first. The same task
drops what gradio leaves behind in a session at each Run (``prune_strays``), and gives freed memory back to the
system (``give_back_memory``) once sessions have gone or a burst of requests has ended: glibc's malloc keeps what
a process frees for its own later use, so without it the server's RSS stayed at its peak (issue 74: 1 140 MiB
after a probe, against 717 at start, unchanged after 16 idle minutes).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import datetime
import functools
import logging
import platform

from engine import settings
from explorer.page import session_state

IDLE_S = 600.0
SWEEP_EVERY_S = 5.0
log = logging.getLogger("unmask.sessions")


def capacity() -> int:
    """How many sessions gradio keeps (``UNMASK_SESSIONS``; the oldest are dropped beyond it)."""
    return settings.get("UNMASK_SESSIONS")


def idle_seconds() -> float:
    """``UNMASK_SESSION_IDLE_S`` (checked at start, ``engine.settings``)."""
    return settings.get("UNMASK_SESSION_IDLE_S")


def let_go_idle(holder, idle_s: float, now: datetime.datetime | None = None) -> int:
    """Drop the sessions of gradio's ``StateHolder`` unused for ``idle_s``; returns how many went."""
    now = now or datetime.datetime.now()
    with holder.lock:
        quiet = [s for s, t in list(holder.time_last_used.items()) if (now - t).total_seconds() > idle_s]
        for s in quiet:
            holder.session_data.pop(s, None)
            holder.time_last_used.pop(s, None)
        # sessions the capacity cap evicted leave their last-use time behind
        for s in [s for s in holder.time_last_used if s not in holder.session_data]:
            holder.time_last_used.pop(s, None)
    return len(quiet)


def prune_strays(holder, known: set) -> int:
    """Drop the entries of each session's copy of the page that are no component of the page.

    gradio (6.x) answers a component update by storing a new instance under the component's id; on the next
    event, its preprocessing also stores that instance under the instance's own (new) id, so every Run that
    updates its controls leaves ~50 stray entries in the session (~0.6 MiB a Run, never freed). Nothing looks
    them up: the page is addressed by its components' ids only (it has no ``gr.render``)."""
    n = 0
    with holder.lock:
        for state in list(holder.session_data.values()):
            for key in [k for k in state.blocks_config.blocks if k not in known]:
                del state.blocks_config.blocks[key]
                state.config_values.pop(key, None)
                n += 1
    return n


@functools.cache
def _glibc():
    """The C library where it is glibc (None elsewhere: musl and macOS have no ``malloc_trim``)."""
    if platform.libc_ver()[0] != "glibc":
        return None
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


def give_back_memory() -> bool:
    """glibc's ``malloc_trim(0)``: the free pages of every malloc arena returned to the system (freed tensors and
    sessions otherwise stay in the process's RSS, held for later allocations). True where it ran."""
    libc = _glibc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


class Sweeper:
    """One sweep after another (``sweep``), and when memory is to be given back: when sessions were let go, or
    when the latest use of any session is older than a sweep's interval and newer than at the last time (a burst
    of requests has ended; never while requests keep coming)."""

    def __init__(self, known: set, idle_s: float, every_s: float):
        self.known, self.idle_s, self.every_s = known, idle_s, every_s
        self.trimmed_after: datetime.datetime | None = None      # the latest use the last trim came after

    def sweep(self, holder, now: datetime.datetime | None = None) -> bool:
        """Idle sessions let go and strays pruned; True when memory is to be given back now."""
        now = now or datetime.datetime.now()
        if n := let_go_idle(holder, self.idle_s, now):
            log.info("let %d idle sessions go", n)
        prune_strays(holder, self.known)
        with holder.lock:
            latest = max(holder.time_last_used.values(), default=None)
        quiet = latest is not None and latest != self.trimmed_after \
            and (now - latest).total_seconds() > self.every_s
        if n or quiet:
            self.trimmed_after = latest
        return bool(n or quiet)


def lifespan(idle_s: float | None = None):
    """The app's lifespan (``launch(app_kwargs={"lifespan": ...})``): a task on the server's own event loop sweeps
    the sessions every ``SWEEP_EVERY_S`` (or half the idle time). On that loop a sweep never interleaves with
    gradio's handling of an event, which reads and writes the same session dictionaries without a lock."""
    idle = idle_seconds() if idle_s is None else idle_s
    every_s = min(SWEEP_EVERY_S, idle / 2)

    async def sweep_forever(app):
        # the page's components: fixed once it serves (no gr.render)
        sweeper = Sweeper(set(app.get_blocks().blocks), idle, every_s)
        while True:
            await asyncio.sleep(every_s)
            if sweeper.sweep(app.state_holder):
                await asyncio.to_thread(give_back_memory)   # it walks every arena: off the event loop

    @contextlib.asynccontextmanager
    async def run(app):
        session_state.install(app)
        task = asyncio.create_task(sweep_forever(app))
        try:
            yield
        finally:
            task.cancel()
    return run
