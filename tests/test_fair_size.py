"""The fair gate's sizes (``explorer.page.fair``, issue 65 point 4): among clients as served as each other the
smallest request goes first; a light request passes a gate held by heavy ones through its light places; a full
queue or a full burst of never-served clients gives a light newcomer the place of a heavy waiting request instead of
refusing it; a burst of many new addresses cannot fill the queue. Scripted requests; no timing asserted."""

from __future__ import annotations

import asyncio

from explorer.page import fair
from explorer.page.fair import Busy, FairGate
from tests.test_fair import empty, visitor

HEAVY, LIGHT = 1000, 10


async def held(gate, name, host, size, log, refused, go):
    try:
        async with gate.slot("decode", visitor(name, host), size=size):
            log.append(name)
            await go.wait()
    except Busy as e:
        refused[name] = str(e)


def scenario(gate, plan, before_go=None):
    """``plan``: (name, host, size) started in order, one event-loop turn apart; what was let in before the
    release, what was refused (and why), the order of all, and the gate after."""
    async def run():
        log, refused, go, tasks = [], {}, asyncio.Event(), []
        for name, host, size in plan:
            tasks.append(asyncio.create_task(held(gate, name, host, size, log, refused, go)))
            await asyncio.sleep(0)
        seen = list(log)
        go.set()
        await asyncio.gather(*tasks)
        return seen, refused, log
    return asyncio.run(run())


def test_the_smallest_waiting_request_goes_first_among_clients_never_served():
    """c is smaller than a and b but not ``LIGHT`` times smaller than x (no light place): it waits, and goes first."""
    gate = FairGate(concurrent=1, spare=0)
    plan = [("x", "10.0.9.1", HEAVY), ("a", "10.0.1.1", HEAVY), ("b", "10.0.2.1", HEAVY), ("c", "10.0.3.1", 500)]
    seen, refused, log = scenario(gate, plan)
    assert seen == ["x"] and not refused
    assert log == ["x", "c", "a", "b"] and empty(gate)       # before: arrival order, c last


def test_a_light_request_passes_a_gate_held_by_heavy_ones_and_a_heavy_one_waits():
    """Two places, two spare, held by four one-request clients' heavy decodes: a fifth heavy client waits; a light
    one goes through a light place at once (the engine loop seats it within a round or two)."""
    gate = FairGate(concurrent=2, spare=2)
    plan = [(f"h{i}", f"10.0.{i}.1", HEAVY) for i in range(4)] + [("late", "10.0.8.1", HEAVY),
                                                                   ("new", "10.0.9.1", LIGHT)]
    seen, refused, log = scenario(gate, plan)
    assert seen == ["h0", "h1", "h2", "h3", "new"] and not refused and empty(gate)


def test_a_full_queue_gives_a_light_newcomer_a_heavy_waiting_requests_place():
    """The queue (bound 3) is full of never-served clients' heavy requests, one each: a light newcomer takes the
    place of the newest of them (which is told so) instead of being refused; a heavy newcomer is refused."""
    gate = FairGate(concurrent=1, spare=0, waiting_cap=3)
    plan = [("x", "10.0.9.1", HEAVY)] + [(f"w{i}", f"10.0.{i}.1", HEAVY) for i in range(3)] + [
        ("heavy", "10.0.7.1", HEAVY), ("light", "10.0.8.1", LIGHT)]
    seen, refused, log = scenario(gate, plan)
    assert set(refused) == {"heavy", "w2"} and "took your place" in refused["w2"]
    assert "queue is full" in refused["heavy"]
    assert log == ["x", "light", "w0", "w1"] and empty(gate)


def test_a_burst_of_new_addresses_cannot_fill_the_queue(monkeypatch):
    """Forty never-seen addresses (each its own network) arrive together behind one held place: the burst waits
    sixteen at most (``BURST_MIN``; a quarter of the default queue is 64), the rest are refused in one line, and
    the queue keeps room. A light one of the burst takes a heavy one's place; a client served before is not part
    of any burst."""
    monkeypatch.setattr(fair, "BURST_MIN", 16)
    gate = FairGate(concurrent=1, spare=0, waiting_cap=64)
    gate.recent["10.0.200.1"] = -1                              # served earlier: not new
    plan = [("x", "10.0.250.1", HEAVY)] + [(f"n{i}", f"10.{i}.0.1", HEAVY) for i in range(40)] + [
        ("light", "10.0.201.1", LIGHT), ("known", "10.0.200.1", HEAVY)]
    seen, refused, log = scenario(gate, plan)
    burst_refused = [n for n in refused if n.startswith("n")]
    assert len(burst_refused) == 40 - 16 + 1                    # 24 refused outright, one displaced by "light"
    assert all("new to it" in refused[n] or "took your place" in refused[n] for n in burst_refused)
    assert "light" in log and "known" in log and "light" not in refused
    assert log.index("light") == 1                              # the smallest first
    assert empty(gate)
