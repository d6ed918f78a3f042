"""Sessions that go quiet are let go, heartbeat or not.

gradio keeps a session's state (its copy of the page's configuration and every ``gr.State``) until the browser's
heartbeat stops, and a raw-HTTP client has no heartbeat: without this, a script opening sessions could keep them
all until the capacity cap evicts the oldest. A sweeper thread drops every session no event has used for
``UNMASK_SESSION_IDLE_S`` seconds (default 600). A visitor back after that sees their page as it was (scrubbing
runs in the browser); what needs the server's copy of the run asks them to run it again.
"""

from __future__ import annotations

import datetime
import logging
import os
import threading

IDLE_S = 600.0
SWEEP_EVERY_S = 30.0
log = logging.getLogger("unmask.sessions")


def idle_seconds() -> float:
    try:
        return max(1.0, float(os.environ.get("UNMASK_SESSION_IDLE_S", IDLE_S)))
    except ValueError:
        return IDLE_S


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


def start_sweeper(demo, idle_s: float | None = None) -> threading.Thread:
    """A daemon thread that lets idle sessions go (checked every ``SWEEP_EVERY_S``, or half the idle time)."""
    idle = idle_seconds() if idle_s is None else idle_s
    every_s = min(SWEEP_EVERY_S, idle / 2)
    stop = threading.Event()

    def sweep():
        while not stop.wait(every_s):
            holder = getattr(demo, "state_holder", None)
            if holder is not None and (n := let_go_idle(holder, idle)):
                log.info("let %d idle sessions go", n)

    t = threading.Thread(target=sweep, name="unmask-sessions", daemon=True)
    t.stop = stop
    t.start()
    return t
