"""A clock for the tests that bound how long an event loop stalls while other test workers share the cores.

``own_clock`` is the wall clock less the time the calling thread sat runnable in the kernel's run queue waiting for
a core (``/proc/thread-self/schedstat``, field 2). A loop blocked by its own work, by waiting on a lock or the GIL,
or by a sleep still counts in full; only the time another process held the core does not. Three workers on two cores
deschedule a busy thread for 100 ms at times (a body check's loop gap read 103 ms that way), which is the machine's
doing, not the code under test's. Where the kernel keeps no such statistics the clock is the wall clock."""

from __future__ import annotations

import time
from pathlib import Path

SCHEDSTAT = Path("/proc/thread-self/schedstat")


def queued_s() -> float:
    """Seconds the calling thread has spent runnable but waiting for a core; 0.0 where the kernel does not say."""
    try:
        return int(SCHEDSTAT.read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def own_clock() -> float:
    """``time.perf_counter()`` without the calling thread's time in the run queue, in seconds. Read again when the
    thread was descheduled between the two readings (the queue time then counts a wait the wall reading missed)."""
    for _ in range(5):
        before = queued_s()
        now = time.perf_counter()
        after = queued_s()
        if after == before:
            break
    return now - after
