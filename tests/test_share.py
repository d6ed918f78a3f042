"""Fair share of the engine loop (``engine.runtime.share``) and of the fair gate's places, by measured cost: a flow
served more than a waiting one gives a place up at the next round boundary (its newest decode pauses, whole, and
resumes later), and a round shared by several flows leaves out the rows of flows far ahead of the least served, so
a light client's forwards are not each as slow as the flood's batch. Scripted jobs; rounds counted, no timing
asserted."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from unittest.mock import patch

import torch
from hypothesis import example, given, settings, strategies as st

from engine.runtime.engine_loop import EngineLoop, Group, Handle, Job
from engine.runtime.scheduler import Call, Forward
from engine.runtime import ledger, share
from explorer.page import fair
from explorer.page.fair import FairGate
from tests.test_fair import hold, visitor


def counted(n: int, log: list, name: str, sleep_s: float = 0.0):
    """A decode of n model-free requests (each ``sleep_s`` long), noting each answer it gets; returns how many it
    got."""
    got = 0
    for _ in range(n):
        yield Call(time.sleep, (sleep_s,))
        got += 1
        log.append(name)
    return got


def wait_for(cond, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def test_a_flood_gives_a_place_up_at_the_next_round_and_loses_no_work(monkeypatch):
    """Four places, all held by client a's long decodes; b's three-request decode joins once a's decodes have held
    their places for the granularity (here 1 ms of engine time: a's newest pauses) and ends within a few rounds,
    while a's decodes are still far from done. Every decode of a still gets every answer it asked for. Before: b
    waited for one of a's decodes to end (300 rounds)."""
    monkeypatch.setattr(ledger, "GRANULARITY_S", 0.001)
    loop, log = EngineLoop(max_running=4), []
    gate = threading.Event()

    def first():
        yield Call(gate.wait, (10,))                 # holds the first round until b is queued
        return (yield from counted(300, log, "a0", 0.0005))
    flood = loop.submit_many([Job(first, client="a")] +
                             [Job(lambda i=i: counted(300, log, f"a{i}", 0.0005), client="a") for i in range(1, 4)])
    wait_for(lambda: len(loop.running) == 4)
    light = loop.submit(Job(lambda: counted(3, log, "b"), client="b"))
    gate.set()
    assert light.result(timeout=30) == 3
    b_ends = max(i for i, name in enumerate(log) if name == "b")
    assert log[:b_ends].count("a1") < 10, "b waited for a's decodes"
    assert [h.result(timeout=60) for h in flood] == [300] * 4            # the paused one lost nothing
    assert not loop.paused and not loop.running


def test_a_paused_decode_resumes_before_its_clients_new_ones():
    loop, log = EngineLoop(max_running=3), []
    gate = threading.Event()

    def held(name):
        yield Call(gate.wait, (3 if name == "a0" else 0,))        # the first round lasts until b is queued
        return (yield from counted(50, log, name))
    flood = loop.submit_many([Job(lambda i=i: held(f"a{i}"), client="a") for i in range(3)])
    wait_for(lambda: len(loop.running) == 3)
    later = loop.submit(Job(lambda: counted(5, log, "a-later"), client="a"))
    light = loop.submit(Job(lambda: counted(20, log, "b"), client="b"))
    wait_for(lambda: loop.paused)
    paused = loop.paused[0].handle
    assert paused is flood[2]                                      # the newest of the client holding the most
    gate.set()
    light.result(timeout=30)
    later.result(timeout=30)
    assert log.index("a2") < log.index("a-later")                  # resumed before its client's new decode
    assert [h.result(timeout=30) for h in flood] == [50] * 3


def test_a_paused_decodes_budget_clock_keeps_running_and_it_ends_at_its_budget():
    """Wall time from submission, paused or not: a paused decode past its budget ends (TimeoutError, no
    ``on_limit``) while the decode that took its place is still running."""
    loop, log = EngineLoop(max_running=2), []
    gate = threading.Event()

    def held(name):
        yield Call(gate.wait, (10,))
        return (yield from counted(10**6, log, name))
    flood = loop.submit_many([Job(lambda: held("a0"), client="a"),
                              Job(lambda: held("a1"), client="a", budget_s=0.3)])
    wait_for(lambda: len(loop.running) == 2)
    slow = lambda: (x for _ in range(200) for x in [Call(time.sleep, (0.01,))])   # noqa: E731  (2 s of rounds)
    light = loop.submit(Job(slow, client="b"))
    gate.set()
    wait_for(lambda: flood[1].done)
    assert isinstance(flood[1].error, TimeoutError) and not light.done
    loop.abort(flood[0])
    loop.abort(light)


def forwards(adapter, n: int, width: int, log: list, name: str, loop):
    """A decode of n forwards of ``width`` query tokens, noting the round each answer came from."""
    for _ in range(n):
        yield Forward(adapter, torch.arange(width) + 5, torch.ones(width, width, dtype=torch.bool),
                      torch.arange(width), None)
        log.append((loop.rounds, name))
    return n


def test_a_shared_round_runs_a_light_clients_row_every_round_and_the_flood_as_it_is_charged(adapter):
    """Client a runs four decodes of 96-token forwards, b one of 4-token forwards. While b runs, every round has b's
    row, and a's rows sit out the rounds in which a is ahead of b by the granularity or more (b starts its head
    start below a; each round's time is charged by query tokens, a's rows take 96 % of it); before, each of b's
    rounds carried all four of a's rows. a is not starved: its decodes run on and end."""
    loop, log = EngineLoop(max_running=8), []
    flood = loop.submit_many([Job(lambda i=i: forwards(adapter, 30, 96, log, f"a{i}", loop), client="a")
                              for i in range(4)])
    wait_for(lambda: len(log) >= 4)
    light = loop.submit(Job(lambda: forwards(adapter, 12, 4, log, "b", loop), client="b"))
    light.result(timeout=60)
    [h.result(timeout=120) for h in flood]
    rounds_b = [r for r, name in log if name == "b"]
    assert rounds_b == list(range(rounds_b[0], rounds_b[0] + 12)), "b's row ran every round"
    flood_rows = [sum(1 for r2, name in log if r2 == r and name != "b") for r in rounds_b]
    assert sum(1 for n in flood_rows if n) < 6, flood_rows


def test_a_light_client_beside_many_heavy_identities_runs_rounds_of_its_own(adapter):
    """Issue 65: seven identities each run a heavy decode of 96-token forwards, then a light one of 8-token forwards
    arrives. It starts its head start below them (``ledger.HEAD_START_S``) and each identity sits out the rounds
    while it is ahead of the light one by the granularity, so the light one's rounds carry nearly no heavy row
    (before round six, every round carried seven); the heavy ones run again once it has ended."""
    loop, log = EngineLoop(max_running=8), []
    heavy = loop.submit_many([Job(lambda i=i: forwards(adapter, 200, 96, log, f"h{i}", loop), client=f"h{i}")
                              for i in range(7)])
    wait_for(lambda: len(log) >= 14)
    light = loop.submit(Job(lambda: forwards(adapter, 14, 8, log, "b", loop), client="b"))
    light.result(timeout=60)
    rounds_b = [r for r, name in log if name == "b"]
    assert rounds_b == list(range(rounds_b[0], rounds_b[0] + 14)), "b's row ran every round"
    heavy_rows = [sum(1 for r2, name in log if r2 == r and name != "b") for r in rounds_b]
    assert sum(1 for n in heavy_rows if n == 0) >= 10, heavy_rows
    after = len(log)
    wait_for(lambda: len(log) >= after + 7)             # the heavy ones go on
    assert not any(h.done for h in heavy)
    for h in heavy:
        loop.abort(h)


def test_the_gate_lets_a_less_served_client_through_past_a_floods_places():
    """Four places, no spare, all held by one address's sessions: another address, less served, takes one of the
    further places at once (the engine loop pauses a holder for it), and a third too; a second request of a holding
    session waits."""
    async def scenario():
        gate, log, go = FairGate(concurrent=4, spare=0), [], asyncio.Event()
        tasks = [asyncio.create_task(hold(gate, "decode", visitor(f"f{i}", "10.0.0.1"), log, f"f{i}", go))
                 for i in range(4)]
        await asyncio.sleep(0)
        tasks.append(asyncio.create_task(hold(gate, "run", visitor("f0", "10.0.0.1"), log, "f0-again", go)))
        tasks += [asyncio.create_task(hold(gate, "decode", visitor(n, h), log, n, go))
                  for n, h in (("b", "10.0.0.2"), ("c", "10.0.0.3"))]
        for _ in range(3):
            await asyncio.sleep(0)
        seen = list(log)
        go.set()
        await asyncio.gather(*tasks)
        return seen, gate
    seen, gate = asyncio.run(scenario())
    assert seen == ["f0", "f1", "f2", "f3", "b", "c"] and gate.active == 0


def test_two_newcomers_beside_a_client_with_two_decodes_fail_nobody():
    """Issue 65, point 1: client a runs two decodes in a full set and b and c arrive together with nothing
    running. Before, ``preempt`` picked among b and c by ``Counter.get`` (None for both), the comparison raised in
    the engine loop and every running decode failed."""
    loop, log = EngineLoop(max_running=2), []
    flood = loop.submit_many([Job(lambda i=i: counted(200, log, f"a{i}"), client="a") for i in range(2)])
    wait_for(lambda: len(loop.running) == 2)
    newcomers = loop.submit_many([Job(lambda n=n: counted(3, log, n), client=n) for n in ("b", "c")])
    assert [h.result(timeout=30) for h in newcomers] == [3, 3]
    assert [h.result(timeout=30) for h in flood] == [200, 200]
    assert not loop.paused and not loop.running


def test_many_identities_holding_one_decode_each_yield_their_places_by_service():
    """Issue 65, point 4: four places, each held by another client's long decode. A newcomer's short decode is
    seated once a holder has held its place for the granularity and is served more than the newcomer (which starts
    at the least service of the active flows), and ends while the long ones are far from done; each long decode
    still gets every answer."""
    loop, log = EngineLoop(max_running=4), []
    held = loop.submit_many([Job(lambda i=i: counted(150, log, f"c{i}", 0.002), client=f"c{i}") for i in range(4)])
    wait_for(lambda: len(log) >= 8)
    light = loop.submit(Job(lambda: counted(3, log, "new"), client="new"))
    assert light.result(timeout=30) == 3
    assert log.count("c0") < 75, "the newcomer waited for a held place to free"
    assert [h.result(timeout=60) for h in held] == [150] * 4
    assert not loop.paused and not loop.running


def test_a_newcomer_is_not_starved_by_many_identities_slow_small_decodes():
    """Issue 74, finding 3: twelve identities each hold one decode that is small but slow (many steps, each a
    round's row), four places; once they have all been seated (they rotate by service), a newcomer's three-step
    decode ends within a few dozen rounds of its arrival, before any holder ends. Before, the holders' declared
    size (small) seated them first and the places turned in one-second slices: the newcomer waited hundreds of
    rounds."""
    loop, log = EngineLoop(max_running=4), []
    held = loop.submit_many([Job(lambda i=i: counted(2000, log, f"c{i}", 0.002), client=f"c{i}")
                             for i in range(12)])
    wait_for(lambda: all(f"c{i}" in log for i in range(12)), 60)
    arrived = loop.rounds
    light = loop.submit(Job(lambda: counted(3, log, "new", 0.002), client="new"))
    assert light.result(timeout=60) == 3
    assert loop.rounds - arrived <= 40, loop.rounds - arrived
    assert not any(h.done for h in held)
    for h in held:
        loop.abort(h)


def test_a_decode_is_charged_by_what_its_forwards_take_not_what_it_declares(adapter, monkeypatch):
    """Issue 74, finding 3: a link or a Branch asking for a large decode was counted at the gate as the page's
    default run, and the engine trusted each decode's declared size. Now each flow is charged its rows' share of
    every round it ran, by their query tokens: beside a decode of 8-token forwards, one of 256-token forwards is
    charged many times more per round they share (here they share every round: a wide granularity)."""
    monkeypatch.setattr(ledger, "GRANULARITY_S", 10.0)
    loop, seen = EngineLoop(max_running=2), {}

    def probe(width, name):
        for _ in range(6):
            yield Forward(adapter, torch.arange(width) % 50 + 5, torch.ones(width, width, dtype=torch.bool),
                          torch.arange(width), None)
        seen[name] = dict(loop.ledger.service)          # read inside the loop, before either flow leaves
        yield Call(int, (0,))
    hs = loop.submit_many([Job(lambda: probe(256, "big"), client="big"),
                           Job(lambda: probe(8, "small"), client="small")])
    [h.result(timeout=60) for h in hs]
    service = seen["small"]
    assert service[("big",)] > 4 * service[("small",)], service


def test_no_decode_pauses_past_the_paused_caches_budget(monkeypatch):
    """Paused decodes keep their K/V caches: ``share.pause`` pauses none whose cache would take the paused ones
    past ``UNMASK_PAUSED_MB`` together; it keeps its place instead. Two caches of 1 MiB each: a 1 MiB budget
    pauses the first and not the second; 0 pauses none (preempt too)."""
    from types import SimpleNamespace as NS
    from engine.runtime.ledger import Ledger

    accounts = Ledger()

    def running(n):
        layer = NS(keys=torch.zeros(1 << 17), values=torch.zeros(1 << 17))      # 2 x 512 KiB
        job = Job(lambda: None, client=f"c{n}")
        accounts.enter(job.client)
        return NS(request=NS(cache=NS(layers=[layer])), handle=NS(job=job, submitted=n), tenure=1.0)
    a, b = running(1), running(0)
    accounts.charge("c1", 3.0)                        # a's flow is the most served
    accounts.charge("c0", 1.0)
    loop = NS(running=[a, b], paused=[], queues={}, max_running=2, cond=threading.Condition())
    assert share.held_bytes(a) == 1 << 20
    monkeypatch.setenv("UNMASK_PAUSED_MB", "1")
    assert share.pause(loop, a) and not share.pause(loop, b)
    assert loop.paused == [a] and loop.running == [b]
    monkeypatch.setenv("UNMASK_PAUSED_MB", "0")
    accounts.enter("new")
    loop = NS(running=[a, b], paused=[], queues={"new": [Handle(Job(lambda: None, client="new"), None)]},
              max_running=2, cond=threading.Condition(), ledger=accounts)
    share.preempt(loop)
    assert loop.running == [a, b] and not loop.paused
    monkeypatch.setenv("UNMASK_PAUSED_MB", "2")
    share.preempt(loop)
    assert loop.paused == [a]                         # one waiting flow: one pause, the most served


def test_the_gate_lets_a_client_holding_nothing_through_when_one_request_each_holds_every_place():
    """Four places, no spare, each held by one request of another address of one /24: an address of another
    network is let through at once (a further place; the engine loop shares its places by service), while a second
    request of a holding session waits (served as much as the others)."""
    async def scenario():
        gate, log, go = FairGate(concurrent=4, spare=0), [], asyncio.Event()
        tasks = [asyncio.create_task(hold(gate, "decode", visitor(f"h{i}", f"10.0.1.{i}"), log, f"h{i}", go))
                 for i in range(4)]
        await asyncio.sleep(0)
        tasks.append(asyncio.create_task(hold(gate, "run", visitor("h0", "10.0.1.0"), log, "h0b", go)))
        tasks.append(asyncio.create_task(hold(gate, "decode", visitor("new", "10.0.2.1"), log, "new", go)))
        for _ in range(3):
            await asyncio.sleep(0)
        seen = list(log)
        go.set()
        await asyncio.gather(*tasks)
        return seen, gate
    seen, gate = asyncio.run(scenario())
    assert seen == ["h0", "h1", "h2", "h3", "new"] and gate.active == 0


class Stepped(EngineLoop):
    """An engine loop whose rounds the test runs itself, one ``_step`` at a time, on its own thread (no thread of
    its own: a round that raises raises in the test)."""

    def _serve(self) -> None:
        return


def scripted(n: int, flavour: int):
    """A decode of n model-free requests; flavour 2 raises in its rule half-way, flavour 3 cannot start."""
    if flavour == 3:
        raise ValueError("cannot start")
    for i in range(n):
        yield Call(int, (i,))
        if flavour == 2 and i == n // 2:
            raise ValueError("its rule failed")
    return n


ACTIONS = st.lists(st.tuples(st.sampled_from(["arrive"] * 3 + ["abort", "cancel"] + ["step"] * 3),
                             st.integers(0, 11), st.integers(0, 12), st.integers(0, 9)), min_size=5, max_size=80)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(actions=ACTIONS, places=st.integers(1, 4))
@example(actions=[("arrive", 0, 3, 5), ("arrive", 0, 4, 5), ("step", 0, 0, 0), ("arrive", 1, 3, 5),
                  ("arrive", 2, 3, 5), ("step", 0, 0, 0)], places=2)       # issue 65's crash: two newcomers at once
def test_random_arrivals_costs_aborts_pauses_and_resumes_raise_no_round_and_end_every_decode_once(actions, places):
    """The gate in front of the engine loop, as on the page (one ledger, the gate's flow as the job's client): up to
    12 clients (some sessions shared), decodes of 0 to 12 requests (their measured costs decide places and pauses),
    some past their budget at once, some capped by a group of one, some failing in their rule or at their start;
    visitors who leave while waiting or running (their decode aborted), aborts, rounds run between them. No round
    raises, every decode ends exactly once (``Handle.finish`` never meets a finished one), and the ledger forgets
    every flow once all have ended."""
    ends: Counter = Counter()
    finish = Handle.finish

    def counted_finish(self, value=None, error=None):
        ends[self] += 1
        return finish(self, value, error)

    async def scenario():
        loop = Stepped(max_running=places)
        gate = FairGate(concurrent=places, waiting_cap=8, per_pool=4, ledger=loop.ledger)
        handles, tasks = [], []

        async def visit(client, session, size, flavour):
            async with gate.slot("decode", visitor(f"s{session}", f"10.0.{client}.1")):
                job = Job(lambda: scripted(size, flavour), client=fair.client(),
                          budget_s=0.0 if flavour == 0 else None, group=Group(1) if flavour == 1 else None)
                h = loop.submit(job)
                handles.append(h)
                try:
                    while not h.done:
                        await asyncio.sleep(0)
                finally:
                    loop.abort(h)

        for what, a, b, c in actions:
            if what == "arrive":
                tasks.append(asyncio.create_task(visit(a, a % 7 + b, b, c)))
            elif what == "abort" and handles:
                loop.abort(handles[a % len(handles)])
            elif what == "cancel" and tasks:
                tasks[a % len(tasks)].cancel()
            for _ in range(3):
                await asyncio.sleep(0)
            if what == "step":
                loop._step()
        for _ in range(1000):                        # drain: every decode ends within its requests' rounds
            if all(t.done() for t in tasks) and not (loop.running or loop.paused or loop._aborts):
                break
            loop._step()
            for _ in range(3):
                await asyncio.sleep(0)
        await asyncio.gather(*tasks, return_exceptions=True)
        return loop, gate, handles

    with patch.object(Handle, "finish", counted_finish):
        loop, gate, handles = asyncio.run(scenario())
    assert all(h.done for h in handles) and all(ends[h] == 1 for h in handles), [ends[h] for h in handles]
    assert not (loop.running or loop.paused or any(loop.queues.values()) or gate.holding or gate.queues)
    assert gate.active == 0 and loop.ledger.active() == 0
