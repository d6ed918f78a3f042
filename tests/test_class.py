"""A full queue, against the real app on a loopback port (``explorer.page.fair``): with a small queue, the refused
requests are the newest of the client holding the most, never the other client's (a class behind one address with
the default settings: ``tests/test_load.py``). Bounded: loopback, eleven calls."""

from __future__ import annotations

import threading
import time

import pytest

from tests.conftest import running_app
from tools.page.bench_abandon import HEAVY
from tools.page.bench_visitors import visit_http

pytestmark = pytest.mark.load


def test_a_full_queue_refuses_the_newest_of_the_client_holding_the_most(tmp_path):
    """Two places, six waiting at most, four per client; heavy decodes (a 5 s budget each: at 2 s it failed on a machine
    at a load of 10, where A's first decodes can end before the twelfth call reaches the gate). Address A sends eight
    (two run, four wait, two refused at once: over its bound), then address B (another /24) four: B's first takes a
    spare place (it holds nothing: ``FairGate.below_share``), its fourth finds the queue full and A holding the most,
    so A's newest waiting request is refused to make room; B loses nothing."""
    env = dict(UNMASK_MAX_RUNNING="2", UNMASK_WAITING="6", UNMASK_PER_ADDRESS="4", UNMASK_MAX_SECONDS="5")
    sources = ["127.0.0.1"] * 8 + ["127.0.1.2"] * 4        # two networks (a /24 is bounded as one client)
    with running_app(tmp_path, **env) as (url, _):
        outs, threads = [{"source": s} for s in sources], []
        for o in outs:                                  # in order: each reaches the gate before the next is sent
            t = threading.Thread(target=visit_http, args=(url, "Ann has 3 apples.", HEAVY, [0.0], o))
            t.start()
            threads.append(t)
            while "start" not in o:
                time.sleep(0.005)
            o["start"].set()
            time.sleep(0.1)
        for t in threads:
            t.join(timeout=120)
    refused = [i for i, o in enumerate(outs) if "refused" in o]
    assert all("queue is full" in outs[i]["refused"] for i in refused), [outs[i]["refused"] for i in refused]
    # A: #0, #1 run, #2-#5 wait, #6 and #7 over its bound; B: #8 runs in a spare place, #9, #10 fill the queue,
    # #11 makes A's newest (#5) go
    assert refused == [5, 6, 7], refused


def test_every_model_request_reaches_the_fair_queue_past_gradios_forty_events(tmp_path):
    """gradio starts at most ``max_threads`` events at once (40 by default) and keeps the rest in its own
    first-come queue; the app raises it, so 60 heavy decodes of one address all reach the gate: two run, fifty
    wait (UNMASK_PER_ADDRESS) and exactly eight are refused as the queue is full (with gradio's 40, none would be:
    38 would wait and the rest sit in gradio's queue, out of the gate's order)."""
    from tools.page.bench_visitors import measure_full
    env = dict(UNMASK_MAX_RUNNING="2", UNMASK_PER_ADDRESS="50", UNMASK_MAX_SECONDS="2")
    with running_app(tmp_path, **env) as (url, proc):
        full = measure_full(url, proc.pid, 60)
    assert full["turned_away"] == 0 and full["refused_full"] == 8, full
