"""Timing with warm-up, on a clock that counts a GPU's queued work, and the spread of repeated ratios.

A shared two-core machine drifts by tens of percent within minutes, so the benchmarks compare settings in one
process, interleaved, and report ratios with their range rather than absolute times alone.
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Callable


def now() -> float:
    """The wall clock once the GPU (if torch is loaded and one is in use) has finished what was queued on it."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.synchronize()
    return time.perf_counter()


def timed(fn: Callable[[], object], reps: int, warm: int = 2) -> list[float]:
    """Seconds of each of ``reps`` calls of ``fn``, after ``warm`` untimed calls (first-call allocations, caches)."""
    for _ in range(warm):
        fn()
    times = []
    for _ in range(reps):
        t0 = now()
        fn()
        times.append(now() - t0)
    return times


def median_ms(fn: Callable[[], object], reps: int, warm: int = 2) -> float:
    """Median ms of ``fn`` over ``reps`` calls after ``warm`` warm-up calls."""
    return 1e3 * statistics.median(timed(fn, reps, warm))


def seconds(fn: Callable[[], object]) -> tuple[float, object]:
    """One call of ``fn``: its seconds and its result."""
    t0 = now()
    out = fn()
    return now() - t0, out


def spread(values: list[float], digits: int = 3) -> dict:
    """The median and range of repeated ratios (one per interleaved round)."""
    return dict(median=round(statistics.median(values), digits), low=round(min(values), digits),
                high=round(max(values), digits))
