"""A wave of visitors: each on its own thread connects first (its client made, its page loaded), then all start at
one moment, so what is timed is the server's work on the wave, not the clients' set-up."""

from __future__ import annotations

import threading
import time
from typing import Callable


class Gate:
    """Where ``n`` visitors wait once connected; ``open`` waits for all of them, starts the clock and lets them go.
    Each visitor reads its times from that common start with ``since``."""

    def __init__(self, n: int, connect_s: float = 120):
        self._ready = threading.Barrier(n + 1, timeout=connect_s)
        self._go = threading.Event()
        self.t0 = 0.0

    def wait(self) -> None:
        """A visitor: connected, waiting for the start."""
        self._ready.wait()
        self._go.wait()

    def open(self) -> None:
        """Every visitor connected: the clock starts and they go (a visitor that never connects raises
        ``threading.BrokenBarrierError`` after ``connect_s``)."""
        self._ready.wait()
        self.t0 = time.perf_counter()
        self._go.set()

    def since(self) -> float:
        return time.perf_counter() - self.t0


def wave(visitors: list[Callable[[Gate], object]], timeout_s: float = 600) -> Gate:
    """Each of ``visitors`` (a function of the gate that waits at it once connected) on its own thread, all released
    at one moment; returns once every one has ended (or ``timeout_s`` passed), with the gate (its start time)."""
    gate = Gate(len(visitors))
    threads = [threading.Thread(target=v, args=(gate,)) for v in visitors]
    for t in threads:
        t.start()
    gate.open()
    for t in threads:
        t.join(timeout=timeout_s)
    return gate
