"""Fair queueing of the model (``explorer.page.fair``): work-conserving (no refusal while there is a free place or
room in the queue); with no engine time charged, the fewest turns first over pools, clients and sessions; a
session's own rule (one running and one waiting per kind); a full queue sends away its most served waiting request;
waiters whose client left passed over; nothing kept once everything has ended. The order among waiters is tested
with no spare or further places (``spare=0, overflow=0``); what they let through, in ``tests/test_share.py``; the
order by measured cost, in ``tests/test_fair_cost.py``."""

from __future__ import annotations

import asyncio
import random
from types import SimpleNamespace

import pytest

from explorer.page.fair import Busy, FairGate
from explorer.page.presence import Gone, Streams


def visitor(session: str, host: str = "10.0.0.1"):
    return SimpleNamespace(session_hash=session, client=SimpleNamespace(host=host))


async def hold(gate, kind, request, log, name, release: asyncio.Event):
    async with gate.slot(kind, request):
        log.append(name)
        await release.wait()


def empty(gate: FairGate) -> bool:
    return not (gate.held or gate.queues or gate.holding or gate.ledger.active()) and gate.active == 0


def test_a_session_gets_one_running_and_one_waiting_request_per_kind():
    async def scenario():
        gate, log, go = FairGate(), [], asyncio.Event()
        a = visitor("a")
        first = asyncio.create_task(hold(gate, "run", a, log, "a1", go))
        second = asyncio.create_task(hold(gate, "run", a, log, "a2", go))
        await asyncio.sleep(0)
        with pytest.raises(Busy, match="running and one waiting"):
            async with gate.slot("run", a):
                pass
        other_kind = asyncio.create_task(hold(gate, "sweep", a, log, "a-sweep", go))   # its own share
        await asyncio.sleep(0)
        go.set()
        await asyncio.gather(first, second, other_kind)
        return log, gate
    log, gate = asyncio.run(scenario())
    assert log == ["a1", "a2", "a-sweep"] and empty(gate)


def test_a_class_of_64_behind_one_address_is_all_admitted_and_served_round_robin():
    """64 sessions of one address, each pressing Run twice, 16 places: none refused (128 requests, the default
    per-client bound), every session's first request served before any session's second."""
    async def scenario():
        gate, log = FairGate(concurrent=16, spare=0, overflow=0), []
        gos = {}
        tasks = []
        for rnd in range(2):
            for i in range(64):
                name = f"s{i}-{rnd}"
                gos[name] = asyncio.Event()
                tasks.append(asyncio.create_task(hold(gate, "run", visitor(f"s{i}"), log, name, gos[name])))
                await asyncio.sleep(0)
        assert gate.active == 16 and gate.waiting == 112
        while len(log) < 128:                           # the running ones finish, in the order they started
            for name in list(log):
                gos[name].set()
            await asyncio.sleep(0)
        for go in gos.values():
            go.set()
        await asyncio.gather(*tasks)
        return log, gate
    log, gate = asyncio.run(scenario())
    firsts = [i for i, name in enumerate(log) if name.endswith("-0")]
    assert len(log) == 128 and max(firsts) < min(i for i, n in enumerate(log) if n.endswith("-1"))
    assert empty(gate)


def test_under_contention_a_flooder_waits_behind_its_classmates_and_another_address():
    """One place, held. Address A: a flooding session f (five kinds, two requests each: all within its session's
    rule), then classmates s1 and s2; address B: one visitor. Order of service: f's first (it came first), B, s1,
    s2, and only then f's other nine."""
    async def scenario():
        gate, log = FairGate(concurrent=1, spare=0, overflow=0), []
        gos, tasks = {}, []

        def start(name, kind, req):
            gos[name] = asyncio.Event()
            tasks.append(asyncio.create_task(hold(gate, kind, req, log, name, gos[name])))

        start("x", "run", visitor("x", "10.0.0.9"))
        await asyncio.sleep(0)
        for kind in ("run", "compare", "sweep", "branch", "decode"):
            for k in range(2):
                start(f"f-{kind}-{k}", kind, visitor("f", "10.0.0.1"))
        start("s1", "run", visitor("s1", "10.0.0.1"))
        start("s2", "run", visitor("s2", "10.0.0.1"))
        start("b1", "run", visitor("b1", "10.0.0.2"))
        await asyncio.sleep(0)
        assert gate.waiting == 13
        while len(log) < 14:
            gos[log[-1]].set()                          # the one running finishes
            await asyncio.sleep(0)
        gos[log[-1]].set()
        await asyncio.gather(*tasks)
        return log, gate
    log, gate = asyncio.run(scenario())
    assert log[:5] == ["x", "f-run-0", "b1", "s1", "s2"] and sorted(log[5:]) == sorted(
        f"f-{k}-{i}" for k in ("run", "compare", "sweep", "branch", "decode") for i in range(2) if (k, i) != ("run", 0))
    assert empty(gate)


def test_a_full_queue_sends_away_the_most_served_waiting_request():
    """Each address its own /24. A pool over its bound refuses its own newest (nothing tells its requests apart);
    a full queue makes its most served pool's newest waiting request leave for a newcomer served less, and refuses
    a newcomer served as much as every waiting one (first come first served among equals)."""
    async def scenario():
        gate, log = FairGate(concurrent=1, spare=0, overflow=0, waiting_cap=4, per_pool=3), []
        go, tasks, refused = asyncio.Event(), {}, {}

        def start(name, req):
            async def run():
                try:
                    await hold(gate, "run", req, log, name, go)
                except Busy as e:
                    refused[name] = str(e)
            tasks[name] = asyncio.create_task(run())

        start("x", visitor("x", "10.0.9.9"))            # holds the place
        for i in range(3):
            start(f"a{i}", visitor(f"a{i}", "10.0.1.1"))
        await asyncio.sleep(0)
        start("a3", visitor("a3", "10.0.1.1"))          # over its pool's bound (3), and the newest of it: refused
        start("b0", visitor("b0", "10.0.2.1"))          # the queue is now full (4)
        await asyncio.sleep(0)
        start("c0", visitor("c0", "10.0.3.1"))          # full, all served alike: the newcomer goes
        await asyncio.sleep(0)
        gate.ledger.charge(("10.0.1.0/24", "10.0.1.1", "a0"), 1.0)   # the engine charged A's pool
        start("d0", visitor("d0", "10.0.4.1"))          # full: A's pool, and in it a0, is the most served: a0 leaves
        for _ in range(3):
            await asyncio.sleep(0)
        assert set(refused) == {"a3", "c0", "a0"} and gate.waiting == 4
        go.set()
        await asyncio.gather(*tasks.values())
        return log, refused, gate
    log, refused, gate = asyncio.run(scenario())
    assert all("queue is full" in m for m in refused.values()) and "served less" in refused["a0"]
    assert log == ["x", "b0", "d0", "a1", "a2"] and empty(gate)


def test_a_newcomer_whose_stream_is_not_open_yet_takes_the_place_of_the_most_served_waiter():
    """A full queue, the engine has charged A's pool, and C's request reaches the gate before its client's stream
    opens (gradio's order under load: POST first, stream a moment later): its most served waiting request (a0's, charged) leaves for it,
    as it would for a C whose stream was open (the bound on streamless requests refused C outright: CI, stop 81)."""
    async def scenario():
        streams = Streams()
        streams.installed = True
        gate, log, go, refused = FairGate(concurrent=1, spare=0, overflow=0, waiting_cap=3, per_pool=3,
                                          streams=streams), [], asyncio.Event(), {}

        async def run(name, req):
            try:
                await hold(gate, "run", req, log, name, go)
            except Busy as e:
                refused[name] = str(e)
        for s in ("x", "a0", "a1", "a2"):
            streams.opened(s)
        tasks = [asyncio.create_task(run("x", visitor("x", "10.0.9.9")))]
        await asyncio.sleep(0)
        tasks += [asyncio.create_task(run(f"a{i}", visitor(f"a{i}", "10.0.1.1"))) for i in range(3)]
        await asyncio.sleep(0)
        gate.ledger.charge(("10.0.1.0/24", "10.0.1.1", "a0"), 1.0)
        tasks.append(asyncio.create_task(run("c", visitor("c", "10.0.3.1"))))   # its stream not open yet
        await asyncio.sleep(0.01)
        streams.opened("c")
        await asyncio.sleep(0.01)
        go.set()
        await asyncio.gather(*tasks)
        return log, refused, gate
    log, refused, gate = asyncio.run(scenario())
    assert set(refused) == {"a0"} and "served less" in refused["a0"], refused
    assert log == ["x", "c", "a1", "a2"] and empty(gate)


def test_a_waiter_whose_client_left_is_passed_over_and_holds_nothing():
    """b's stream opens and closes while its request waits: when the place frees it goes to c, and b's request
    ends with ``Gone``; a waiter cancelled by gradio holds nothing either."""
    async def scenario():
        streams = Streams()
        streams.installed = True
        gate, log, go = FairGate(concurrent=1, spare=0, overflow=0, streams=streams), [], asyncio.Event()
        for s in ("a", "b", "c", "d"):
            streams.opened(s)
        running = asyncio.create_task(hold(gate, "run", visitor("a", "10.0.0.1"), log, "a", go))
        await asyncio.sleep(0)
        gone = asyncio.create_task(hold(gate, "run", visitor("b", "10.0.0.2"), log, "b", go))
        cancelled = asyncio.create_task(hold(gate, "run", visitor("d", "10.0.0.4"), log, "d", go))
        waiting = asyncio.create_task(hold(gate, "run", visitor("c", "10.0.0.3"), log, "c", go))
        await asyncio.sleep(0)
        streams.closed("b")                             # b closes its tab
        cancelled.cancel()
        go.set()
        await asyncio.gather(running, waiting)
        with pytest.raises(Gone):
            await gone
        return log, gate
    log, gate = asyncio.run(scenario())
    assert log == ["a", "c"] and empty(gate)


@pytest.mark.parametrize("seed", range(6))
def test_random_traffic_is_work_conserving_and_leaves_nothing_behind(seed):
    """Random arrivals (four addresses, twelve sessions, four kinds), finishes and cancels: at every step no place
    is free while a request waits, a request is refused only by its session's rule or a full queue, and the gate
    is empty at the end."""
    rng = random.Random(seed)

    async def scenario():
        gate = FairGate(concurrent=3, waiting_cap=10, per_pool=6)
        gos, tasks, outcomes = [], [], []

        async def one(req, kind, go):
            mine = gate.held[(kind, req.session_hash)]
            try:
                async with gate.slot(kind, req):
                    await go.wait()
                outcomes.append("served")
            except Busy as e:                           # at arrival (its session's rule, a full queue), or
                outcomes.append("refused")              # later, to make room in a full queue
                assert mine >= 2 if "running and one waiting" in str(e) else "queue is full" in str(e)
            except asyncio.CancelledError:
                outcomes.append("cancelled")

        for _ in range(300):
            r = rng.random()
            if r < 0.5:
                req = visitor(f"s{rng.randrange(12)}", f"10.0.0.{rng.randrange(4)}")
                go = asyncio.Event()
                gos.append(go)
                tasks.append(asyncio.create_task(one(req, rng.choice(("run", "compare", "sweep", "decode")), go)))
            elif r < 0.9 and gos:
                gos.pop(rng.randrange(len(gos))).set()
            elif tasks:
                tasks[rng.randrange(len(tasks))].cancel()
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            assert gate.active <= gate.concurrent + gate.spare + gate.overflow
            assert gate.active >= gate.concurrent + gate.spare or gate.waiting == 0, "a place is free, one waits"
            assert not any(gate.may_enter(p) for p in gate.queues), "a request that may enter waits"
        for go in gos:
            go.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        return gate, outcomes
    gate, outcomes = asyncio.run(scenario())
    assert "served" in outcomes and empty(gate)


def test_the_app_believes_forwarded_for_only_from_the_operators_proxies(monkeypatch):
    """Off a Space, app.py hands UNMASK_TRUSTED_PROXIES to uvicorn (FORWARDED_ALLOW_IPS): by default no peer is a
    trusted proxy, so a loopback client's forged X-Forwarded-For changes nothing."""
    from uvicorn.middleware.proxy_headers import _TrustedHosts
    from explorer.page import proxy
    monkeypatch.delenv("UNMASK_TRUSTED_PROXIES", raising=False)
    monkeypatch.delenv("SPACE_ID", raising=False)
    assert proxy.mode() == "named"
    trusted = _TrustedHosts(proxy.forwarded_allow_ips())
    assert "127.0.0.1" not in trusted and "::1" not in trusted
    monkeypatch.setenv("UNMASK_TRUSTED_PROXIES", "10.0.0.0/8")
    trusted = _TrustedHosts(proxy.forwarded_allow_ips())
    assert "10.1.2.3" in trusted and "127.0.0.1" not in trusted
    monkeypatch.setenv("SPACE_ID", "someone/unmask")       # named proxies win on a Space too
    assert proxy.mode() == "named"
    src = (__import__("pathlib").Path(__file__).resolve().parent.parent / "app.py").read_text()
    assert 'os.environ["FORWARDED_ALLOW_IPS"] = proxy.forwarded_allow_ips()' in src


async def flood_trial(hosts, arrive_at: int, budget: int = 5, ticks: int = 70):
    """A scripted lock-out flood: 2 places, 8 waiting at most; running requests hold their place ``budget`` ticks;
    every tick the attacker adds two one-request clients from ``hosts`` (a host with a request waiting or running
    skips its turn). A newcomer from another address arrives at tick ``arrive_at``: the tick it is served, or None,
    and whether it was refused."""
    gate = FairGate(concurrent=2, waiting_cap=8, per_pool=8)
    started, gos, tasks, refused, busy = {}, {}, [], [], set()
    tick, pool = 0, iter(hosts)

    async def one(name, host):
        gos[name] = asyncio.Event()
        try:
            async with gate.slot("decode", visitor(name, host)):
                started[name] = tick
                await gos[name].wait()
        except Busy:
            refused.append(name)
        busy.discard(host)

    for tick in range(ticks):
        for name, t in started.items():
            if tick - t >= budget:
                gos[name].set()
        for _ in range(2):
            host = next(pool)
            if host not in busy:
                busy.add(host)
                tasks.append(asyncio.create_task(one(f"attack{tick}-{host}", host)))
        if tick == arrive_at:
            tasks.append(asyncio.create_task(one("newcomer", "198.51.100.7")))
        for _ in range(5):
            await asyncio.sleep(0)
    for go in gos.values():
        go.set()
    await asyncio.gather(*tasks)
    return started.get("newcomer"), "newcomer" in refused


@pytest.mark.parametrize("pattern", ["ipv6 /64s of one /56", "ten ipv4 addresses coming back"])
def test_a_newcomer_is_never_locked_out_by_many_one_request_clients(pattern):
    """The issue's lock-out probe, scripted: before, the newcomer was refused every time (each /64 a client of its
    own holding one request, as much as the newcomer would). Now the newcomer takes the place of a served or
    running client's newest waiting request, and is served within one budget of its arrival, every time."""
    import itertools
    if pattern.startswith("ipv6"):
        hosts = (f"2001:db8:0:{i:x}::1" for i in itertools.count())          # a fresh /64 each time
    else:     # ten addresses, each back as soon as its request ended; the newcomer after each was served once
        hosts = itertools.cycle([f"203.0.113.{i}" for i in range(10)])
    for arrive_at in (36, 39, 43, 47, 50):
        served_at, was_refused = asyncio.run(flood_trial(hosts, arrive_at))
        assert not was_refused and served_at is not None and served_at - arrive_at <= 5, (arrive_at, served_at)


def test_waiting_requests_are_bounded_per_ipv4_24_and_ipv6_32():
    """Issue 65: a pool of addresses (one /24, one /32 of /48s) cannot fill the queue: its clients' waiting
    requests count together against the per-client bound; another network's newcomer still waits its turn."""
    async def scenario():
        gate, log, go = FairGate(concurrent=1, spare=0, overflow=0, waiting_cap=100, per_pool=3), [], asyncio.Event()
        refused = []

        async def one(host):
            try:
                await hold(gate, "run", visitor(host, host), log, host, go)
            except Busy as e:
                refused.append((host, str(e)))
        tasks = []
        for host in ["192.0.2.200", "10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.1.1",
                     "2001:db8:1::1", "2001:db8:2::1", "2001:db8:3::1", "2001:db8:4::1", "2001:db9::1"]:
            tasks.append(asyncio.create_task(one(host)))
            await asyncio.sleep(0)
        go.set()
        await asyncio.gather(*tasks)
        return refused, log, gate
    refused, log, gate = asyncio.run(scenario())
    assert [h for h, _ in refused] == ["10.0.0.4", "2001:db8:4::1"], refused
    assert "from your network, 10.0.0.0/24" in refused[0][1] and len(log) == 9 and empty(gate)
