"""A full queue, against the real app on a loopback port (``explorer.page.fair``): with a small queue, a pool over its
bound refuses its own newest, and a full queue sends away the newest waiting request of the most served pool, never
a less served one's (a class behind one address with the default settings: ``tests/test_load.py``). Bounded:
loopback, nineteen calls."""

from __future__ import annotations

import threading
import time

import pytest

from tests.conftest import running_app
from tools.bench.visitors import Gate
from tools.page.bench_abandon import HEAVY
from tools.page.bench_visitors import visit_http

pytestmark = pytest.mark.load


def visited(url: str, spec: str, gate: Gate, out: dict) -> None:
    """``visit_http``, let go when the test stops the app under a decode it no longer needs."""
    import httpx
    try:
        visit_http(url, "Ann has 3 apples.", spec, gate, out)
    except httpx.TransportError:
        out["cut"] = True


def test_a_full_queue_refuses_the_newest_of_the_most_served_pool(tmp_path):
    """Two running places, six spare and two further ones, six waiting at most, four per pool; heavy decodes (a 10 s
    budget each, counted from arrival). Address A sends fourteen: eight take the places, four wait, two are refused
    at once (over its pool's bound, and the newest of it); address B (another /24, less served) four: two take
    the further places (``FairGate.may_enter``), two wait and fill the queue; then address C: the queue is full and
    A's pool the most served (the engine charged its decodes), so A's newest waiting request leaves for it. No
    request arrives after C's, so no refusal can follow its: the app is stopped then, not left to finish the decodes
    (10 s of them)."""
    env = dict(UNMASK_MAX_RUNNING="2", UNMASK_WAITING="6", UNMASK_PER_ADDRESS="4", UNMASK_MAX_SECONDS="10")
    sources = ["127.0.0.1"] * 14 + ["127.0.1.2"] * 4 + ["127.0.2.3"]   # three networks
    outs, threads = [{"source": s} for s in sources], []

    def full() -> list[int]:
        return [i for i, o in enumerate(outs) if "queue is full" in o.get("refused", "")]
    with running_app(tmp_path, forked=True, **env) as (url, _):
        for o in outs:                                  # in order: each reaches the gate before the next is sent
            gate = Gate(1)
            t = threading.Thread(target=visited, args=(url, HEAVY, gate, o))
            t.start()
            threads.append(t)
            gate.open()
            time.sleep(0.1)
        deadline = time.monotonic() + 30                # past every budget: all have ended by then
        while len(full()) < 3 and time.monotonic() < deadline and any(t.is_alive() for t in threads):
            time.sleep(0.05)
        time.sleep(0.3)                                 # room for a wrong fourth refusal to show
        refused = full()
    for t in threads:
        t.join(timeout=30)
    # A: #0-#7 hold places, #8-#11 wait, #12 and #13 over its pool's bound; B: #14, #15 in further places, #16,
    # #17 fill the queue; C: #18 makes A's newest waiting (#11) go
    assert refused == [11, 12, 13], [(i, o.get("refused")) for i, o in enumerate(outs) if "refused" in o]


def test_every_model_request_reaches_the_fair_queue_past_gradios_forty_events(tmp_path):
    """gradio starts at most ``max_threads`` events at once (40 by default) and keeps the rest in its own
    first-come queue; the app raises it, so 70 heavy decodes of one address all reach the gate: 8 to 10 hold places
    (the gate's 2 x (1 + SPARE), and up to ``overflow`` more for requests less served than a holder), fifty wait
    (UNMASK_PER_ADDRESS) and the rest, 10 to 12, are refused as the queue is full (with gradio's 40, none would be:
    the rest would sit in gradio's queue, out of the gate's order)."""
    from tools.page.bench_visitors import measure_full
    # a wait counts in the budget: at 20 s none ends before the queue has filled
    env = dict(UNMASK_MAX_RUNNING="2", UNMASK_PER_ADDRESS="50", UNMASK_MAX_SECONDS="20")
    with running_app(tmp_path, forked=True, **env) as (url, proc):
        full = measure_full(url, proc.pid, 70)
    assert full["turned_away"] == 0 and 10 <= full["refused_full"] <= 12, full
