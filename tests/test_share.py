"""Fair share of the engine loop (``engine.runtime.share``) and of the fair gate's places: a client that floods the
running set gives a place up at the next round boundary to a client holding fewer (its newest decode pauses, whole,
and resumes later), and a round shared by several clients runs the flood's rows by deficit round robin, so a light
client's forwards are not each as slow as the flood's batch. Scripted jobs; rounds counted, no timing asserted."""

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


def test_a_flood_gives_a_place_up_at_the_next_round_and_loses_no_work():
    """Four places, all held by client a's long decodes; b's three-request decode joins at once (a's newest pauses)
    and ends within a few rounds, while a's decodes are still far from done. Every decode of a still gets every
    answer it asked for. Before: b waited for one of a's decodes to end (300 rounds)."""
    loop, log = EngineLoop(max_running=4), []
    gate = threading.Event()

    def first():
        yield Call(gate.wait, (10,))                 # holds the first round until b is queued
        return (yield from counted(300, log, "a0"))
    flood = loop.submit_many([Job(first, client="a")] +
                             [Job(lambda i=i: counted(300, log, f"a{i}"), client="a") for i in range(1, 4)])
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


def test_a_shared_round_runs_a_light_clients_row_every_round_and_the_floods_by_their_credit(adapter):
    """Client a runs four decodes of 96-token forwards, b one of 4-token forwards. While b runs, every round has b's
    row and at most two of a's (a's credit, 64 tokens a round, pays a 96-token row about two rounds in three);
    before, each of b's rounds carried all four of a's rows. a is not starved: its rows keep running."""
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
    assert max(flood_rows) <= 2 and sum(flood_rows) >= 12 * 64 // 96 - 1, flood_rows


def test_a_light_client_beside_many_heavy_identities_shares_each_round_half_and_half(adapter):
    """Issue 65: seven identities each run a heavy decode of 96-token forwards (size 1000), then a light one of
    8-token forwards (size 10). While it runs, the heavy rows of a round take about as many tokens as its own (the
    heavy class shares its quantum, 64 tokens a round, seven ways), not seven times as many; the heavy ones still
    run. Before, each of its rounds carried a heavy row of every identity that had credit (up to 7 x 96 tokens)."""
    loop, log = EngineLoop(max_running=8), []
    heavy = loop.submit_many([Job(lambda i=i: forwards(adapter, 200, 96, log, f"h{i}", loop), client=f"h{i}",
                                  size=1000) for i in range(7)])
    wait_for(lambda: len(log) >= 14)
    light = loop.submit(Job(lambda: forwards(adapter, 14, 8, log, "b", loop), client="b", size=10))
    light.result(timeout=60)
    rounds_b = [r for r, name in log if name == "b"]
    assert rounds_b == list(range(rounds_b[0], rounds_b[0] + 14)), "b's row ran every round"
    heavy_rows = [sum(1 for r2, name in log if r2 == r and name != "b") for r in rounds_b]
    assert 1 <= sum(heavy_rows) <= 14 * 64 // 96 + 2 and max(heavy_rows) <= 2, heavy_rows
    for h in heavy:
        loop.abort(h)


def test_the_gate_lets_a_client_below_its_share_through_past_a_floods_places():
    """Four places, all held by one address: another address is let through at once (a spare place), and a third
    too; the flood's own next request waits."""
    async def scenario():
        gate, log, go = FairGate(concurrent=4), [], asyncio.Event()
        tasks = [asyncio.create_task(hold(gate, "decode", visitor(f"f{i}", "10.0.0.1"), log, f"f{i}", go))
                 for i in range(4)]
        await asyncio.sleep(0)
        tasks.append(asyncio.create_task(hold(gate, "decode", visitor("f9", "10.0.0.1"), log, "f9", go)))
        tasks += [asyncio.create_task(hold(gate, "decode", visitor(n, h), log, n, go))
                  for n, h in (("b", "10.0.0.2"), ("c", "10.0.0.3"))]
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


def test_many_identities_holding_one_decode_each_yield_their_places_in_time(monkeypatch):
    """Issue 65, point 4: four places, each held by another client's long decode (the places rule sees no client
    holding more than another). A newcomer's short decode is seated once the longest-held decode has had its slice
    (here 0.05 s), and ends while the long ones are far from done; each long decode still gets every answer. Before,
    the newcomer waited for one of them to end."""
    from engine.runtime import share
    monkeypatch.setattr(share, "SLICE_S", 0.05)
    loop, log = EngineLoop(max_running=4), []
    held = loop.submit_many([Job(lambda i=i: counted(150, log, f"c{i}", 0.002), client=f"c{i}") for i in range(4)])
    wait_for(lambda: len(log) >= 8)
    light = loop.submit(Job(lambda: counted(3, log, "new"), client="new"))
    assert light.result(timeout=30) == 3
    assert log.count("c0") < 75, "the newcomer waited for a held place to free"
    assert [h.result(timeout=60) for h in held] == [150] * 4
    assert not loop.paused and not loop.running


def test_a_light_newcomer_is_seated_before_many_identities_heavy_decodes_that_waited_longer(monkeypatch):
    """Issue 65, point 4 at 48 identities: four places held and eight more identities waiting, each with one heavy
    decode (size 1000), then a newcomer's light one (size 10). It is seated first among the waiting (shortest job
    first among the never served) and takes a held place after ``HOLD_S``, not a slice (10 s here): its answers all
    come before any waiting identity's first. Before, it waited behind the eight, in arrival order."""
    from engine.runtime import share
    monkeypatch.setattr(share, "SLICE_S", 10.0)
    monkeypatch.setattr(share, "HOLD_S", 0.02)
    loop, log = EngineLoop(max_running=4), []
    held = loop.submit_many([Job(lambda i=i: counted(400, log, f"c{i}", 0.002), client=f"c{i}", size=1000)
                             for i in range(4)])
    wait_for(lambda: len(log) >= 8)
    queued = loop.submit_many([Job(lambda i=i: counted(400, log, f"w{i}", 0.002), client=f"w{i}", size=1000)
                               for i in range(8)])
    light = loop.submit(Job(lambda: counted(3, log, "new"), client="new", size=10))
    assert light.result(timeout=30) == 3
    first_waiting = min((i for i, name in enumerate(log) if name.startswith("w")), default=len(log))
    assert max(i for i, name in enumerate(log) if name == "new") < first_waiting
    for h in held + queued:
        loop.abort(h)


def test_no_decode_pauses_past_the_paused_caches_budget(monkeypatch):
    """Paused decodes keep their K/V caches: ``share.pause`` pauses none whose cache would take the paused ones
    past ``UNMASK_PAUSED_MB`` together; it keeps its place instead. Two caches of 1 MiB each: a 1 MiB budget
    pauses the first and not the second; 0 pauses none (by_time too)."""
    from types import SimpleNamespace as NS
    from engine.runtime import share

    def running(seated):
        layer = NS(keys=torch.zeros(1 << 17), values=torch.zeros(1 << 17))      # 2 x 512 KiB
        job = Job(lambda: None, client=f"c{seated}", size=100)
        return NS(request=NS(cache=NS(layers=[layer])), handle=NS(job=job), seated=seated)
    a, b = running(0.0), running(0.1)
    loop = NS(running=[a, b], paused=[], queues={}, max_running=2, cond=threading.Condition())
    assert share.held_bytes(a) == 1 << 20
    monkeypatch.setenv("UNMASK_PAUSED_MB", "1")
    assert share.pause(loop, a) and not share.pause(loop, b)
    assert loop.paused == [a] and loop.running == [b]
    monkeypatch.setenv("UNMASK_PAUSED_MB", "0")
    loop = NS(running=[a, b], paused=[], queues={"new": [Handle(Job(lambda: None, client="new", size=1), None)]},
              max_running=2, cond=threading.Condition())
    share.by_time(loop, now=100.0)
    assert loop.running == [a, b] and not loop.paused
    monkeypatch.setenv("UNMASK_PAUSED_MB", "2")
    share.by_time(loop, now=100.0)
    assert loop.paused == [a]                         # one waiting client: one pause, the longest held


def test_the_gate_lets_a_client_holding_nothing_through_when_one_request_each_holds_every_place():
    """Four places, each held by one request of another address: a fifth address is let through at once (a spare
    place; the engine loop slices in time), while a second request of a holding address waits."""
    async def scenario():
        gate, log, go = FairGate(concurrent=4), [], asyncio.Event()
        tasks = [asyncio.create_task(hold(gate, "decode", visitor(f"h{i}", f"10.0.1.{i}"), log, f"h{i}", go))
                 for i in range(4)]
        await asyncio.sleep(0)
        tasks.append(asyncio.create_task(hold(gate, "decode", visitor("h0b", "10.0.1.0"), log, "h0b", go)))
        tasks.append(asyncio.create_task(hold(gate, "decode", visitor("new", "10.0.2.1"), log, "new", go)))
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
def test_random_arrivals_sizes_aborts_pauses_and_resumes_raise_no_round_and_end_every_decode_once(actions, places):
    """The gate in front of the engine loop, as on the page: up to 12 clients (some sessions shared), decodes of 0 to
    12 requests (their sizes: light ones take light places and heavy ones' places), some past their budget at once, some capped by a group of one, some failing in their rule or at
    their start; visitors who leave while waiting or running (their decode aborted), aborts, rounds run between
    them. No round raises, and every decode ends exactly once (``Handle.finish`` never meets a finished one)."""
    ends: Counter = Counter()
    finish = Handle.finish

    def counted_finish(self, value=None, error=None):
        ends[self] += 1
        return finish(self, value, error)

    async def scenario():
        loop, gate = Stepped(max_running=places), FairGate(concurrent=places, waiting_cap=8, per_client=4)
        handles, tasks = [], []

        async def visit(client, session, size, flavour):
            async with gate.slot("decode", visitor(f"s{session}", f"10.0.{client}.1"), size * 100):
                job = Job(lambda: scripted(size, flavour), client=f"10.0.{client}.1", size=size * 100,
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
    assert not (loop.running or loop.paused or any(loop.queues.values()) or gate.new or gate.sizes)
    assert gate.active == 0
