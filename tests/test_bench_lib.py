"""tools/bench, the benchmarks' shared parts: a wave starts every visitor at one moment, after all have connected;
settings switch for a block and come back; repeated ratios keep their spread."""

from __future__ import annotations

import os
import threading
import time

import pytest

from tools.bench.clock import spread, timed
from tools.bench.settings import settings
from tools.bench.visitors import Gate, wave


def test_a_wave_starts_every_visitor_after_the_slowest_has_connected():
    connected, started = [], []

    def visitor(delay: float):
        def go(gate: Gate) -> None:
            time.sleep(delay)                      # a slow client's set-up: the clock must not start before it
            connected.append(time.perf_counter())
            gate.wait()
            started.append(gate.since())
        return go
    gate = wave([visitor(d) for d in (0.0, 0.05, 0.2)])
    assert len(started) == 3 and gate.t0 >= max(connected)
    assert all(0 <= s < 0.2 for s in started)     # measured from the opening, not from the first thread's start


def test_a_visitor_that_never_connects_breaks_the_gate_instead_of_hanging():
    gate = Gate(2, connect_s=0.2)
    t = threading.Thread(target=lambda: pytest.raises(threading.BrokenBarrierError, gate.wait))
    t.start()
    with pytest.raises(threading.BrokenBarrierError):
        gate.open()
    t.join(timeout=5)


def test_settings_switch_for_a_block_and_come_back(monkeypatch):
    monkeypatch.setenv("UNMASK_LAYOUT", "ragged")
    monkeypatch.delenv("UNMASK_STATIC", raising=False)
    with settings(UNMASK_LAYOUT="packed", UNMASK_STATIC="on"):
        assert os.environ["UNMASK_LAYOUT"] == "packed" and os.environ["UNMASK_STATIC"] == "on"
    assert os.environ["UNMASK_LAYOUT"] == "ragged" and "UNMASK_STATIC" not in os.environ


def test_timing_warms_up_first_and_ratios_keep_their_range():
    calls = []
    times = timed(lambda: calls.append(1), reps=3, warm=2)
    assert len(calls) == 5 and len(times) == 3 and all(t >= 0 for t in times)
    assert spread([0.9, 1.2, 1.0]) == dict(median=1.0, low=0.9, high=1.2)
