"""The engine thread's end: ``stop`` ends it at a round boundary, and the process's exit waits for it, so a
daemon thread inside torch never aborts the process (issue 74: SIGABRT, "terminate called without an active
exception", and the JSON of ``bench --json > out.json`` lost)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest

from engine.runtime import lifecycle
from engine.runtime.engine_loop import Aborted, EngineLoop, Job
from tests.test_engine_loop import calls
from tools.bench_exits import ROOT, runs


def test_stop_ends_the_thread_at_a_round_boundary_and_every_decode_then_and_later_is_aborted():
    loop = EngineLoop(max_running=1)
    running = loop.submit(Job(lambda: calls(10**9, pause_s=0.001), client="a"))
    waiting = loop.submit(Job(lambda: calls(3), client="b"))
    while not loop.running:
        time.sleep(0.001)
    assert loop.stop(timeout_s=5) and not loop.thread.is_alive()
    for h in (running, waiting):
        with pytest.raises(Aborted, match="stopped"):
            h.result(timeout=1)
    late = loop.submit(Job(lambda: calls(1)))             # no thread will serve it: it ends at once, not never
    with pytest.raises(Aborted):
        late.result(timeout=1)


def test_stop_all_asks_every_loop_and_waits_within_one_deadline():
    """Two loops each in a 0.5 s round: both asked first, so the exit waits for one round's time, not two."""
    loops = [EngineLoop(max_running=1) for _ in range(2)]
    handles = [loop.submit(Job(lambda: calls(10**9, pause_s=0.5))) for loop in loops]
    while not all(loop.rounds for loop in loops):
        time.sleep(0.01)
    t0 = time.monotonic()
    assert lifecycle.stop_all(timeout_s=10)
    assert time.monotonic() - t0 < 0.9 and not any(loop.thread.is_alive() for loop in loops)
    for h in handles:
        with pytest.raises(Aborted):
            h.result(timeout=1)


def test_the_process_loop_serves_again_after_an_entry_point_stopped_it():
    """An entry point's ``main`` run in this process (a test, a notebook) stops every loop as it returns: the next
    caller of the process loop gets a live one with the same limits, not a dead one that aborts everything, and
    the same ledger (the page's gate orders by it: a new one would never be charged)."""
    from engine.runtime import jobs
    loop = jobs.configure(max_running=3)
    assert lifecycle.stop_all(timeout_s=10) and loop.stopped
    again = jobs.engine_loop()
    assert again is not loop and not again.stopped and again.max_running == 3 and again.ledger is loop.ledger
    assert again.submit(Job(lambda: calls(2))).result(timeout=10) is not None


EXIT_INSIDE_TORCH = textwrap.dedent("""
    import json, time, torch
    from engine.runtime.engine_loop import EngineLoop, Job
    from engine.runtime.scheduler import Call
    x = torch.randn(384, 384)
    def busy():                       # a decode whose rounds are all torch: the thread is inside torch at the exit
        while True:
            yield Call(torch.mm, (x, x))
    loop = EngineLoop()
    loop.submit(Job(busy))
    while loop.rounds < 3:
        time.sleep(0.01)
    print(json.dumps(list(range(30000))))
""")


def test_a_process_that_exits_while_the_engine_thread_is_inside_torch_exits_0_with_its_output_whole():
    """Before: every run aborted (exit -6, "terminate called without an active exception"; 3 of 3, so one run
    tells: the thread's rounds are all torch, so it is inside torch at every exit); the exit now ends the loop at
    its round boundary first (``lifecycle.stop_all`` at ``atexit``)."""
    out = subprocess.run([sys.executable, "-c", EXIT_INSIDE_TORCH], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and "terminate" not in out.stderr, (out.returncode, out.stderr[-300:])
    assert json.loads(out.stdout) == list(range(30000))


def test_the_bench_command_exits_0_with_its_json_whole_two_runs_at_once():
    """The issue's command (``--n 2``, the embedded model), two runs at once (the aborts came while other work
    loaded the cores); the benchmark ``python -m tools.bench_exits`` runs 50 (docs/security.md gives its figures).
    Each run is a fresh interpreter (7 CPU-seconds on a quiet machine, 15-20 under the suite's load): the
    regression test of the exit is the one above, inside torch."""
    res = runs(2, n=2, parallel=2)
    assert res["codes"] == {0: 2} and res["broken"] == 0, res
