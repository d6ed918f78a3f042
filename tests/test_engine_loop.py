"""The engine loop (engine.runtime.engine_loop): decodes that join and leave between rounds give what they give alone;
admission is round robin over clients; aborts, budgets and a failing decode end that decode only; nothing is kept
after a decode ends."""

from __future__ import annotations

import gc
import threading
import time

import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

from engine.decoders import build_decoder
from engine.runtime.engine_loop import Aborted, EngineLoop, Handle, Job
from engine.runtime.loop import Generation
from engine.runtime.scheduler import Call, Forward
from engine.tasks import get_task
from tests.test_batch import same_records


def calls(n: int, log: list | None = None, name: str = "", pause_s: float = 0.0):
    """A decode of n model-free requests (a ``Call`` each); returns n."""
    for _ in range(n):
        yield Call(time.sleep, (pause_s,))
        if log is not None:
            log.append(name)
    return n


def started(log: list, name: str, n: int):
    """A job that notes when it was admitted (its ``start`` runs on admission)."""
    def start():
        log.append(name)
        return calls(n)
    return start


def test_admission_is_round_robin_over_clients_under_a_flood():
    """Client a floods ten decodes before b and c ask for one each: with two places, b and c join as soon as a
    place frees, never behind a's whole queue."""
    loop, log = EngineLoop(max_running=2), []
    gate = threading.Event()
    def gated():
        yield Call(gate.wait, (10,))          # holds the round until every job is queued
    first = loop.submit(Job(gated, client="a"))
    while not loop.running:
        time.sleep(0.001)
    handles = loop.submit_many([Job(started(log, f"a{i}", 2), client="a") for i in range(10)])
    handles += loop.submit_many([Job(started(log, "b", 2), client="b"), Job(started(log, "c", 2), client="c")])
    gate.set()
    for h in [first, *handles]:
        h.result(timeout=30)
    assert sorted(log[:2]) == ["b", "c"] and log[2:] == [f"a{i}" for i in range(10)], log


def test_a_group_caps_its_own_jobs_and_a_round_respects_the_token_budget(adapter):
    """A group of size 2 never has three running; a round whose queries pass round_tokens is cut, at least one
    request per round, rotating so every decode advances."""
    loop = EngineLoop(max_running=8, round_tokens=20)
    from engine.runtime.engine_loop import Group
    group, seen = Group(2), []

    def job(i):
        for _ in range(3):
            seen.append(group.running)
            logits, _ = yield Forward(adapter, torch.arange(12) + 5, torch.ones(12, 12, dtype=torch.bool),
                                      torch.arange(12), None)
        return i
    hs = loop.submit_many([Job(lambda i=i: job(i), group=group) for i in range(5)])
    assert [h.result(timeout=60) for h in hs] == list(range(5))
    assert max(seen) <= 2 and loop.rounds == 15            # 12 + 12 tokens > 20: one decode per round


def test_abort_mid_run_frees_the_place_and_the_others_go_on():
    loop = EngineLoop(max_running=1)
    endless = loop.submit(Job(lambda: calls(10**9, pause_s=0.001), client="a"))
    waiting = loop.submit(Job(lambda: calls(3), client="b"))
    time.sleep(0.05)
    loop.abort(endless)
    with pytest.raises(Aborted):
        endless.result(timeout=10)
    assert waiting.result(timeout=10) == 3
    late = loop.submit(Job(lambda: calls(10**9)))
    loop.abort(late)                                        # aborted while still waiting, or between rounds
    with pytest.raises(Aborted):
        late.result(timeout=10)


def test_a_decode_past_its_budget_ends_at_a_round_boundary_with_its_last_state():
    loop = EngineLoop(max_running=4)
    done = []
    h = loop.submit(Job(lambda: calls(10**9, done, "x", pause_s=0.01), budget_s=0.2,
                        on_limit=lambda why: ("partial", len(done), why)))
    t0 = time.monotonic()
    kind, n, why = h.result(timeout=10)
    assert kind == "partial" and n >= 1 and "time budget of 0.2 s" in why and h.limit == why
    assert time.monotonic() - t0 < 0.2 + 0.5


def test_a_failing_forward_fails_its_own_decode_only(adapter):
    """A request whose mask does not fit its queries breaks the batched forward; retried alone, it fails by itself
    and every other decode of the round equals its solo decode."""
    probs = get_task("arith").problems("test", 3, seed=5)
    make = [lambda p=p: Generation(adapter, p.prompt, build_decoder("threshold", tau=0.5, block_size=4,
                                                                    gen_length=12)) for p in probs]
    alone = [m().run() for m in make]

    def broken():
        yield Forward(adapter, torch.tensor([5, 6, 7]), torch.ones(2, 9, dtype=torch.bool), torch.arange(3), None)
    loop = EngineLoop(max_running=8)
    hs = loop.submit_many([Job(lambda m=m: m().requests()) for m in make[:2]] + [Job(broken)]
                          + [Job(lambda: make[2]().requests())])
    with pytest.raises(RuntimeError):
        hs[2].result(timeout=60)
    for a, h in zip(alone, [hs[0], hs[1], hs[3]]):
        same_records(a, h.result(timeout=60))


@pytest.mark.parametrize("static", ["off", "on"])
def test_a_round_out_of_device_memory_runs_again_in_halves_and_only_a_decode_too_big_alone_fails(adapter,
                                                                                                 monkeypatch, static):
    """Out of memory injected on the CPU: a round of more than two requests runs out after its forward grew the
    caches (a ``DynamicCache``'s layers, or a slot cache's length on the static path), and a decode marked too big
    runs out whatever its company. The round is split in halves (the device's cache emptied before each retry)
    down to rounds that fit; the too-big decode fails alone with a one-line message, and every other decode equals
    its solo decode."""
    from engine.errors import UserError
    monkeypatch.setenv("UNMASK_STATIC", static)
    from engine.runtime import rounds, scheduler
    probs = get_task("arith").problems("test", 4, seed=5)
    make = [lambda p=p: Generation(adapter, p.prompt, build_decoder("threshold", tau=0.5, block_size=4,
                                                                    gen_length=12)) for p in probs]
    alone = [m().run() for m in make[:3]]
    real, freed, sizes = scheduler.run_round, [], []

    def cramped(reqs):
        out = real(reqs)                                  # the caches grew: the retry must cut them back
        if len(reqs) > 2 or any(getattr(r, "too_big", False) for r in reqs):
            raise torch.OutOfMemoryError("CUDA out of memory (injected)")
        sizes.append(len(reqs))
        return out

    def too_big():
        for req in make[3]().requests():
            if isinstance(req, Forward):
                req.too_big = True
            yield req
    monkeypatch.setattr(scheduler, "run_round", cramped)
    monkeypatch.setattr(rounds, "free_device_memory", lambda: freed.append(1))
    loop = EngineLoop(max_running=8)
    hs = loop.submit_many([Job(lambda m=m: m().requests()) for m in make[:3]] + [Job(too_big)])
    with pytest.raises(UserError, match="^out of device memory: this decode does not fit even alone"):
        hs[3].result(timeout=60)
    for a, h in zip(alone, hs[:3]):
        same_records(a, h.result(timeout=60))
    assert freed and max(sizes) == 2 and loop.retries["out of memory"] >= 1 and loop.retries["failed"] == 1


def test_a_round_that_raises_fails_every_decode_waiting_ones_included_and_the_loop_sleeps():
    """A bug of the loop itself, injected (its admission raises) while decodes wait and none runs: every waiting
    decode fails with the error, the loop does not retry at once (before: it spun a core forever and the waiting
    decodes never ended), and it serves the next decode once the bug is gone."""
    loop, tries = EngineLoop(max_running=1), []

    def broken():
        tries.append(1)
        raise RuntimeError("injected bug")
    loop._admit = broken
    hs = loop.submit_many([Job(lambda: calls(2), client=str(i)) for i in range(3)])
    for h in hs:
        with pytest.raises(RuntimeError, match="injected bug"):
            h.result(timeout=5)
    time.sleep(0.2)
    assert len(tries) == 1 and not loop.waiting and not loop.running
    del loop._admit
    assert loop.submit(Job(lambda: calls(2))).result(timeout=5) == 2


def test_a_decode_that_raises_when_closed_during_a_failing_round_leaves_the_engine_thread_serving(caplog):
    """A round raises (a bug of the loop, injected) while a decode runs whose generator raises when it is closed:
    every decode still ends with the round's error, the close's own error is logged (a bug kept visible), and the
    engine thread lives on to serve the next decode (before: the close's error ended the thread, and every later
    decode waited forever)."""
    loop = EngineLoop(max_running=2)

    def closes_badly():
        try:
            while True:
                yield Call(time.sleep, (0.001,))
        finally:
            raise RuntimeError("injected close failure")
    running = loop.submit(Job(closes_badly, client="a"))
    while not loop.running:
        time.sleep(0.001)
    waiting = loop.submit(Job(lambda: calls(2), client="b"))

    def broken():
        raise RuntimeError("injected bug")
    loop._chosen = broken
    for h in (running, waiting):
        with pytest.raises(RuntimeError, match="injected bug"):
            h.result(timeout=5)
    del loop._chosen
    assert loop.submit(Job(lambda: calls(2))).result(timeout=5) == 2
    assert loop.thread.is_alive()
    assert any("injected close failure" in (r.exc_text or "") or "injected close failure" in str(r.exc_info)
               for r in caplog.records)


def test_nothing_is_kept_after_300_decodes():
    loop = EngineLoop(max_running=16)
    for _ in range(3):
        hs = loop.submit_many([Job(lambda: calls(2), client=str(i % 7)) for i in range(100)])
        assert [h.result(timeout=30) for h in hs] == [2] * 100
        del hs
    gc.collect()
    assert not loop.waiting and not loop.running and not loop._aborts
    assert not [o for o in gc.get_objects() if isinstance(o, Handle) and o.loop is loop]


SPECS = ["ar", "threshold:tau=0.7,block_size=4", "s2d2:block_size=4,router=always", "tspd:block_size=4,controller=heuristic",
         "llada:block_size=4,steps=2", "threshold:tau=0.5,block_size=4,temperature=1.0,seed=3"]


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(order=st.permutations(range(len(SPECS))), gaps=st.lists(st.floats(0, 0.02), min_size=len(SPECS),
                                                               max_size=len(SPECS)))
def test_interleavings_give_the_solo_decodes(adapter, order, gaps):
    """Decodes submitted from several threads at random moments share rounds in whatever way the timing gives;
    each one's tokens, NFE and records equal its solo decode."""
    from engine.catalogue.spec import parse_spec
    from engine.runtime.jobs import engine_loop
    probs = get_task("arith").problems("test", len(SPECS), seed=9)

    def make(k):
        name, params = parse_spec(SPECS[k])
        return Generation(adapter, probs[k].prompt, build_decoder(name, gen_length=12, **params))
    alone = {k: make(k).run() for k in order}
    got = {}

    def submit(k, gap):
        time.sleep(gap)
        got[k] = engine_loop().submit(Job(make(k).requests, client=str(k % 2))).result(timeout=120)
    threads = [threading.Thread(target=submit, args=(k, g)) for k, g in zip(order, gaps)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in order:
        same_records(alone[k], got[k])


@pytest.mark.parametrize("model,spec", [("unmask-tasks-small", "simsd:block_size=8"),
                                        ("unmask-uniform-small", "uniform")])
def test_drafter_and_canvas_decodes_beside_others_give_their_solo_decodes(model, spec):
    """SimSD's drafter forwards and the uniform canvas's calls share rounds with another model's decode."""
    from engine.catalogue.spec import parse_spec
    from engine.models.model import load_model
    from engine.runtime.jobs import run_batched
    from engine.runtime.resources import cached_loader
    adapter = load_model(model, device="cpu")
    load = cached_loader("cpu")
    name, params = parse_spec(spec)
    probs = get_task("arith").problems("test", 3, seed=11)
    make = [lambda p=p, sp=(name, params): Generation(adapter, p.prompt, build_decoder(sp[0], **sp[1]), load=load)
            for p in probs]
    tasks = load("unmask-tasks-small")      # another model's decode in the same rounds (its own batch)
    make.append(lambda: Generation(tasks, probs[0].prompt, build_decoder("ar", gen_length=16), load=load))
    alone = [m().run() for m in make]
    for a, b in zip(alone, run_batched([lambda m=m: m().requests() for m in make], 4)):
        same_records(a, b)


@pytest.mark.parametrize("name,value", [("UNMASK_SESSIONS", "abc"), ("UNMASK_SESSION_IDLE_S", "x"),
                                        ("UNMASK_PER_ADDRESS", "lots"), ("UNMASK_MAX_RUNNING", "-3"),
                                        ("UNMASK_MAX_SECONDS", "nan"), ("UNMASK_ALLOW_DOWNLOAD", "yes")])
def test_a_mistyped_operator_setting_is_refused_with_one_line(monkeypatch, name, value):
    from engine import settings
    monkeypatch.setenv(name, value)
    with pytest.raises(settings.SettingError, match=f"^{name}=") as e:
        settings.check_all()
    assert e.value.code == 2 and "\n" not in str(e.value)


def test_the_app_stops_on_a_bad_setting_before_it_serves():
    """One line naming the variable, exit status 2, before any model is loaded (no silent default)."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "UNMASK_PER_ADDRESS": "lots", "GRADIO_SERVER_PORT": "1"}
    out = subprocess.run([sys.executable, "app.py"], cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stderr.strip().startswith("error: UNMASK_PER_ADDRESS=")
    assert "Traceback" not in out.stderr


def test_the_settings_table_in_docs_is_the_modules_own():
    from pathlib import Path
    from engine import settings
    doc = (Path(__file__).resolve().parent.parent / "docs" / "security.md").read_text()
    assert settings.table() in doc


def test_the_app_stops_with_one_line_on_a_model_path_that_links_out(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path
    link = tmp_path / "model"
    link.symlink_to("/etc")
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "UNMASK_MODELS": str(link), "GRADIO_SERVER_PORT": "1", "UNMASK_CACHE_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "app.py"], cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and out.stderr.strip().startswith("error: ") and "Traceback" not in out.stderr


def test_a_round_cut_by_memory_rotates_as_one_cut_by_tokens(monkeypatch):
    """Review of round seven: a round cut by its query tokens rotates which decodes run, but the byte budget's cut
    came after the rotated picks were sorted, so the same low-index decodes always fit first and the last one
    never ran. Four decodes of 2 query tokens, 4 tokens a round, memory for one request: each runs in 4 rounds."""
    from types import SimpleNamespace
    from engine.runtime import share
    from engine.runtime.engine_loop import EngineLoop
    from engine.runtime.scheduler import Forward
    monkeypatch.setattr(share.LEDGER, "budget", lambda: 100)
    monkeypatch.setattr(share.LEDGER, "left", lambda: 100)
    monkeypatch.setattr(share, "request_bytes", lambda request: 60)
    monkeypatch.setattr(share, "stats_reserve", lambda *a: 0)
    loop = EngineLoop(max_running=4, round_tokens=4)
    job = SimpleNamespace(client="one")
    loop.running = [SimpleNamespace(name=i, handle=SimpleNamespace(job=job), request=Forward(
        adapter=SimpleNamespace(device="cpu"), ids=torch.zeros(2), mask=None, pos=None, cache=None)) for i in range(4)]
    ran = [[r.name for r in loop._chosen()] for _ in range(4)]
    loop.running = []                                  # nothing for the process's exit to end
    assert all(len(x) == 1 for x in ran) and sorted(sum(ran, [])) == [0, 1, 2, 3], ran
