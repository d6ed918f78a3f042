"""The model's fair share among visitors (``explorer.page.fair``): one running and one waiting request per session
and kind, a wider cap per address, round robin between visitors, and nothing held by a visitor who left."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from explorer.page.fair import Busy, FairGate


def visitor(session: str, host: str = "10.0.0.1"):
    return SimpleNamespace(session_hash=session, client=SimpleNamespace(host=host))


async def hold(gate, kind, request, log, name, release: asyncio.Event):
    async with gate.slot(kind, request):
        log.append(name)
        await release.wait()


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
    assert log == ["a1", "a2", "a-sweep"] and not gate.held and gate.active == 0


def test_a_second_visitor_is_served_before_a_flooders_waiting_request():
    async def scenario():
        gate, log = FairGate(), []
        gates = {n: asyncio.Event() for n in ("a1", "a2", "b1")}
        a, b = visitor("a", "10.0.0.1"), visitor("b", "10.0.0.2")
        tasks = [asyncio.create_task(hold(gate, "decode", a, log, "a1", gates["a1"]))]
        await asyncio.sleep(0)
        tasks.append(asyncio.create_task(hold(gate, "decode", a, log, "a2", gates["a2"])))
        await asyncio.sleep(0)
        refused = 0
        for _ in range(18):                                   # the rest of a flood of 20
            try:
                async with gate.slot("decode", a):
                    pass
            except Busy:
                refused += 1
        tasks.append(asyncio.create_task(hold(gate, "decode", b, log, "b1", gates["b1"])))
        await asyncio.sleep(0)
        for name in ("a1", "b1", "a2"):
            gates[name].set()
            await asyncio.sleep(0.01)
        await asyncio.gather(*tasks)
        return log, refused
    log, refused = asyncio.run(scenario())
    assert refused == 18 and log == ["a1", "b1", "a2"]       # b waited for one request, not for a's queue


def test_an_address_shared_by_many_sessions_has_a_wider_cap():
    async def scenario():
        gate, log, go = FairGate(per_address=3), [], asyncio.Event()
        tasks = [asyncio.create_task(hold(gate, "run", visitor(f"s{i}"), log, i, go)) for i in range(3)]
        await asyncio.sleep(0)
        with pytest.raises(Busy):
            async with gate.slot("run", visitor("s9")):
                pass
        go.set()
        await asyncio.gather(*tasks)
        return log
    assert asyncio.run(scenario()) == [0, 1, 2]


def test_a_visitor_who_leaves_while_waiting_holds_nothing():
    async def scenario():
        gate, log, go = FairGate(), [], asyncio.Event()
        a, b = visitor("a", "10.0.0.1"), visitor("b", "10.0.0.2")
        running = asyncio.create_task(hold(gate, "run", a, log, "a1", go))
        await asyncio.sleep(0)
        waiting = asyncio.create_task(hold(gate, "run", b, log, "b1", go))
        await asyncio.sleep(0)
        waiting.cancel()                                     # b closes the tab
        await asyncio.sleep(0)
        go.set()
        await running
        after = asyncio.create_task(hold(gate, "run", b, log, "b2", go))
        await after
        return log, gate
    log, gate = asyncio.run(scenario())
    assert log == ["a1", "b2"] and not gate.held and gate.active == 0 and not gate.waiting


def test_one_client_with_twenty_sessions_holds_its_cap_of_all_kinds_and_another_client_is_served_at_once():
    """20 sessions from one address, decode and compare mixed: only per_address (4) are admitted, the rest refused
    at once with the client's message; a second address is admitted straight away (places are free)."""
    async def scenario():
        gate, log, go = FairGate(per_address=4, concurrent=16), [], asyncio.Event()
        held, refused = [], []
        for i in range(20):
            kind = "decode" if i % 2 else "compare"
            try:
                async with gate.slot(kind, visitor(f"s{i}")):
                    pass
            except Busy as e:
                refused.append(str(e))
                continue
            held.append(asyncio.create_task(hold(gate, kind, visitor(f"s{i}"), log, f"a{i}", go)))
            await asyncio.sleep(0)
        other = asyncio.create_task(hold(gate, "decode", visitor("b", "10.0.0.2"), log, "b", go))
        await asyncio.sleep(0)
        admitted_at_once = "b" in log
        go.set()
        await asyncio.gather(*held, other)
        return log, refused, admitted_at_once
    log, refused, at_once = asyncio.run(scenario())
    assert sum(name.startswith("a") for name in log) == 4 and at_once
    assert len(refused) == 16 and all("your address already has 4" in r for r in refused)


def test_the_app_believes_forwarded_for_only_from_the_operators_proxies(monkeypatch):
    """app.py hands UNMASK_TRUSTED_PROXIES to uvicorn (FORWARDED_ALLOW_IPS): by default no peer is a trusted
    proxy, so a loopback client's forged X-Forwarded-For changes nothing."""
    from uvicorn.middleware.proxy_headers import _TrustedHosts
    from engine import settings
    monkeypatch.delenv("UNMASK_TRUSTED_PROXIES", raising=False)
    trusted = _TrustedHosts(settings.get("UNMASK_TRUSTED_PROXIES"))
    assert "127.0.0.1" not in trusted and "::1" not in trusted
    monkeypatch.setenv("UNMASK_TRUSTED_PROXIES", "10.0.0.0/8")
    trusted = _TrustedHosts(settings.get("UNMASK_TRUSTED_PROXIES"))
    assert "10.1.2.3" in trusted and "127.0.0.1" not in trusted
    src = (__import__("pathlib").Path(__file__).resolve().parent.parent / "app.py").read_text()
    assert 'os.environ["FORWARDED_ALLOW_IPS"] = settings.get("UNMASK_TRUSTED_PROXIES")' in src
