"""The fair gate by measured cost (``explorer.page.fair``, issue 74): its order is the engine time each pool, client
and session took (the ledger the engine loop charges), nothing a request declares; a burst of fresh identities
beside the holders of every place refuses nobody while the queue's bounds hold; the wait counts in the request's
budget; a request whose client never opened its stream is dropped before it waits. Scripted requests; no timing
asserted beyond a budget of a few hundredths of a second."""

from __future__ import annotations

import asyncio
import time

import pytest

from explorer.page import presence
from explorer.page.fair import Busy, FairGate
from explorer.page.presence import Gone, Streams
from explorer.page.worker import follow
from tests.test_fair import empty, visitor


async def held(gate, name, host, log, refused, go, session=None):
    try:
        async with gate.slot("decode", visitor(session or name, host)):
            log.append(name)
            await go.wait()
    except Busy as e:
        refused[name] = str(e)


def test_the_least_served_client_takes_the_next_place_whatever_it_asks():
    """One place held; a and b wait. The engine charged a's pool more (its decodes took longer, whatever they
    declared): b goes first though it came later."""
    async def run():
        gate, log, refused, go = FairGate(concurrent=1, spare=0, overflow=0), [], {}, asyncio.Event()
        tasks = [asyncio.create_task(held(gate, n, h, log, refused, go))
                 for n, h in (("x", "10.0.9.1"), ("a", "10.0.1.1"), ("b", "10.0.2.1"))]
        await asyncio.sleep(0)
        gate.ledger.charge(("10.0.1.0/24",), 0.5)       # as the engine loop charges a flow's rounds
        go.set()
        await asyncio.gather(*tasks)
        return log, refused, gate
    log, refused, gate = asyncio.run(run())
    assert log == ["x", "b", "a"] and not refused and empty(gate)


def test_a_later_identity_never_passes_earlier_ones_still_waiting_for_their_first_turn():
    """The limit of the rule (docs/security.md, round seven, third pass): x holds the one place and has run; a, b and
    c, three fresh identities, wait; then x runs on and z, a fresh identity too, arrives. z is as entitled as a, b and
    c, not more: it goes after them (first come first among equals), however many they are, or a visitor cycling
    identities would pass everyone waiting. Yet it goes before x, served more than any of them."""
    async def run():
        gate, log, refused, go = FairGate(concurrent=1, spare=0, overflow=0), [], {}, asyncio.Event()
        tasks = [asyncio.create_task(held(gate, "x", "10.0.9.1", log, refused, go))]
        await asyncio.sleep(0)
        gate.ledger.charge(("10.0.9.0/24",), 0.2)       # x's decode ran (the engine loop's charge)
        for n, h in (("a", "10.0.1.1"), ("b", "10.0.2.1"), ("c", "10.0.3.1")):
            tasks.append(asyncio.create_task(held(gate, n, h, log, refused, go)))
            await asyncio.sleep(0)
        gate.ledger.charge(("10.0.9.0/24",), 1.0)       # x runs on: the floor rises
        tasks.append(asyncio.create_task(held(gate, "z", "10.0.4.1", log, refused, go)))
        tasks.append(asyncio.create_task(held(gate, "x2", "10.0.9.1", log, refused, go, "x2")))
        await asyncio.sleep(0)
        go.set()
        await asyncio.gather(*tasks)
        return log, refused, gate
    log, refused, gate = asyncio.run(run())
    assert log == ["x", "a", "b", "c", "z", "x2"] and not refused and empty(gate)


def test_a_burst_of_fresh_identities_beside_every_place_held_refuses_no_newcomer():
    """Issue 74, finding 4, at the default bounds: 64 holders (each its own /24) take every place; then 134 fresh
    identities from 134 networks, a newcomer, and a class of 20 behind one address. Nobody is refused (before, a
    burst past a quarter of the queue was: 70 of 134 here, the newcomer and the class among them); the queue stays
    within its bound, and once the holders end every one of them is served."""
    async def run():
        gate = FairGate(concurrent=16, waiting_cap=256, per_pool=128)
        log, refused, go = [], {}, asyncio.Event()
        plan = [(f"h{i}", f"10.{i}.0.1", None) for i in range(64)]
        plan += [(f"n{i}", f"11.{i // 250}.{i % 250}.1", None) for i in range(134)]
        plan += [("newcomer", "12.0.0.1", None)] + [(f"class{i}", "13.0.0.1", f"class{i}") for i in range(20)]
        tasks = []
        for name, host, session in plan:
            tasks.append(asyncio.create_task(held(gate, name, host, log, refused, go, session)))
            await asyncio.sleep(0)
        for _ in range(3):
            await asyncio.sleep(0)
        waiting = gate.waiting
        go.set()
        await asyncio.gather(*tasks)
        return log, refused, waiting, gate
    log, refused, waiting, gate = asyncio.run(run())
    assert not refused, list(refused.items())[:3]
    assert waiting <= 256 and len(log) == 64 + 134 + 21 and empty(gate)


def test_the_wait_at_the_gate_counts_in_the_budget():
    """Issue 74, finding 7: a request still waiting when its budget (counted from its arrival) passes ends with one
    line saying so; the one holding the place is not touched. Before, the wait was outside the budget."""
    async def run():
        gate = FairGate(concurrent=1, spare=0, overflow=0, budget_s=0.05)
        log, refused, go = [], {}, asyncio.Event()
        first = asyncio.create_task(held(gate, "x", "10.0.1.1", log, refused, go))
        await asyncio.sleep(0)
        t0 = time.monotonic()
        await held(gate, "late", "10.0.2.1", log, refused, go)
        waited = time.monotonic() - t0
        go.set()
        await first
        return log, refused, waited, gate
    log, refused, waited, gate = asyncio.run(run())
    assert log == ["x"] and "its whole time budget of 0.05 s" in refused["late"] and waited < 1.0
    assert empty(gate)


def test_a_request_whose_client_never_opens_its_stream_never_waits_or_runs(monkeypatch):
    """Issue 74, finding 7: a streamless POST (its client dropped the connection) used to take a place and decode
    about two seconds (``presence.GRACE_S``) before it was seen as gone; now it ends with ``Gone`` before it takes a
    place, and a request whose stream is open goes on at once."""
    monkeypatch.setattr(presence, "GRACE_S", 0.05)
    streams = Streams()
    streams.installed = True
    streams.opened("here")

    async def run():
        gate = FairGate(concurrent=1, streams=streams)
        entered = []

        async def one(session):
            async with gate.slot("decode", visitor(session, "10.0.1.1")):
                entered.append(session)
        await one("here")
        with pytest.raises(Gone):
            await one("streamless")
        return entered, gate
    entered, gate = asyncio.run(run())
    assert entered == ["here"] and empty(gate)


def test_the_workers_budget_counts_from_the_requests_arrival():
    """``follow`` counts a request's budget from its arrival at the gate (``presence.arrived``): a request that
    arrived longer ago than its budget does no work at all and ends with the budget's line."""
    ran = []

    def produce(should_stop):
        ran.append(True)
        yield "value"

    async def run():
        presence.ARRIVED.set(time.monotonic() - 5.0)
        return [f async for f in follow(produce, budget_s=2.0)]
    out = asyncio.run(run())
    assert not ran and len(out) == 1 and out[0].final and "time budget of 2 s" in out[0].limit


def test_a_request_whose_client_left_before_its_work_began_never_reaches_the_engine():
    """Its client closed its stream between the gate's grant and the worker's start: ``follow`` ends with ``Gone``
    and the work (which would submit a decode) never runs."""
    streams = Streams()
    streams.installed = True
    streams.opened("s")
    ran = []

    def produce(should_stop):
        ran.append(True)
        yield "value"

    async def run():
        presence.watch(streams, "s")
        streams.closed("s")
        with pytest.raises(Gone):
            async for _ in follow(produce, budget_s=5.0):
                pass
    asyncio.run(run())
    assert not ran


def test_a_request_that_must_wait_is_told_so_once_and_one_that_enters_is_not():
    """Issue 74, point 5: the visitor hears in one line, when its request starts to wait at the gate, that it
    waits and that the wait counts in its budget (the page's and ``gradio_client``'s pop-up, ``fairly``); a request
    that takes a free place hears nothing."""
    async def run():
        gate, go, told = FairGate(concurrent=1, spare=0, overflow=0, budget_s=20), asyncio.Event(), {}

        async def one(name, host):
            async with gate.slot("decode", visitor(name, host), tell=lambda line: told.setdefault(name, []).append(
                    line)):
                await go.wait()
        first = asyncio.create_task(one("first", "10.0.1.1"))
        await asyncio.sleep(0)
        second = asyncio.create_task(one("second", "10.0.2.1"))
        await asyncio.sleep(0.01)
        go.set()
        await asyncio.gather(first, second)
        return told, gate
    told, gate = asyncio.run(run())
    assert list(told) == ["second"] and len(told["second"]) == 1 and empty(gate)
    assert told["second"][0] == ("the model is busy: this request waits for its turn (1 waiting); the wait counts "
                                 "in its time budget of 20 s")


def test_a_decode_whose_budget_passed_before_its_first_forward_answers_one_line_not_nothing():
    """A request past the gate waits in the engine loop for a seat: when its budget passes there before its decode
    made a forward, ``follow`` ends with no value and the API answered nothing at all (an empty answer, no error);
    now one line saying it waited its whole budget. A decode that made a forward keeps its partial answer."""
    from explorer.page.api import never_ran
    from explorer.page.worker import Followed
    with pytest.raises(Busy, match="waited 20 s for the model, its whole time budget of 20 s"):
        never_ran(Followed(None, final=True, limit="stopped after 20.0 s"), time.monotonic() - 20.2, 20)
    never_ran(Followed(object(), final=True, limit="stopped after 20.0 s"), time.monotonic() - 20.2, 20)
    never_ran(Followed(None, final=False), time.monotonic(), 20)


def test_requests_waiting_for_their_stream_count_against_the_queues_bounds_and_wake_only_when_it_opens():
    """Review of round seven: a request waits up to ``GRACE_S`` for its client's stream before the gate's bounds
    applied, and each waiter polled every 10 ms, so streamless POSTs with sessions of their own choosing piled up
    without bound on the event loop. Now they count against their pool's bound (the one past it is refused with
    the queue's line), a request of another network still waits, and a waiter wakes when its stream opens."""
    streams = Streams()
    streams.installed = True

    async def run():
        gate = FairGate(concurrent=1, streams=streams, per_pool=3)
        entered, refused = [], []

        async def one(session, host):
            try:
                async with gate.slot("decode", visitor(session, host)):
                    entered.append(session)
            except Busy as e:
                refused.append((session, str(e)))
            except Gone:
                pass
        flood = [asyncio.create_task(one(f"s{i}", "10.0.7.1")) for i in range(5)]
        other = asyncio.create_task(one("late", "10.0.9.1"))
        await asyncio.sleep(0.05)
        waiting = dict(gate.unopened)
        t = time.monotonic()
        streams.opened("late")
        await other
        woke = time.monotonic() - t
        for task in flood:
            task.cancel()
        await asyncio.gather(*flood, return_exceptions=True)
        return entered, refused, waiting, woke, gate
    entered, refused, waiting, woke, gate = asyncio.run(run())
    assert waiting == {"10.0.7.0/24": 3, "10.0.9.0/24": 1}
    assert [s for s, _ in refused] == ["s3", "s4"] and all("queue is full" in line for _, line in refused)
    assert entered == ["late"] and woke < 0.5 and empty(gate) and not gate.unopened and not streams.watchers
