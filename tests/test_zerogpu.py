"""The app on a ZeroGPU Space: every model entry point runs in a worker forked per GPU lease, as Hugging Face's
``spaces`` package runs a ``spaces.GPU`` function (tests/spaces_emulation.py: a fork context, the arguments and
every value through multiprocessing queues, the stop event set by the caller's close). The app is built with
``create_app()`` and has decoded once in its own process before any worker is forked, as a Space starts. Each entry
point (Run's stream, Compare, Branch, Sweep, the ``decode`` API and its branch) completes in the worker, streams,
and gives the tokens the one-process path gives; a caller who leaves ends the worker's decode within a second.
(The GIF is drawn from a finished trace: it decodes nothing.)"""

from __future__ import annotations

import importlib.util
import multiprocessing
import sys
import threading
import time
from pathlib import Path

import pytest

from engine.decoders import parse_spec
from engine.errors import UserError
from engine.harness.service import DecodeService
from engine.runtime import jobs, scheduler

ROOT = Path(__file__).resolve().parent.parent
SPEC = parse_spec("threshold:tau=0.7,block_size=8")


@pytest.fixture(scope="module")
def space(tmp_path_factory):
    """(app module, page) of an app started as on a ZeroGPU Space, its workers ended afterwards."""
    from tests import spaces_emulation
    mp = pytest.MonkeyPatch()
    mp.setenv("SPACES_ZERO_GPU", "true")
    mp.setenv("UNMASK_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    mp.setenv("UNMASK_MAX_SECONDS", "8")    # a worker that hangs fails a call within 8 + 5 s
    mp.delenv("UNMASK_CUDA_GRAPHS", raising=False)
    mp.delenv("UNMASK_COMPILE", raising=False)
    mp.setitem(sys.modules, "spaces", spaces_emulation)
    spec = importlib.util.spec_from_file_location("app_on_zerogpu", ROOT / "app.py")
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)                 # a module of its own: the suite's ``app`` stays one-process
    pages = []
    build = app.build_demo
    app.build_demo = lambda page: (pages.append(page), build(page))[1]
    app.create_app()
    page = pages[0]
    model = page.models[0]
    list(DecodeService.stream(page.service, prompt_of(page), *SPEC, model, page=True))   # a decode in the parent
    try:
        yield app, page
    finally:
        spaces_emulation.shutdown()
        mp.undo()


def prompt_of(page, i: int = 0) -> str:
    return page.examples[page.models[0]][i][0]


def tokens(trace) -> list[int]:
    from explorer.page.api import summary
    return summary(trace)["token_ids"]


def one_process(pg, method: str, /, *args, **kwargs) -> list:
    """What the one-process path gives (the parent's own engine loop)."""
    return list(getattr(DecodeService, method)(pg.service, *args, **kwargs))


def in_worker(pg, method: str, /, *args, **kwargs) -> list:
    """What the leased path gives; the parent's engine loop runs no round meanwhile."""
    rounds = jobs.engine_loop().rounds
    out = list(getattr(pg.service, method)(*args, **kwargs))
    assert jobs.engine_loop().rounds == rounds, "the decode ran in the app's process, not in the worker"
    return out


def test_the_space_is_set_up_for_leases(space):
    app, page = space
    assert type(page.service).__name__ == "LeasedService"
    import os
    assert os.environ["UNMASK_CUDA_GRAPHS"] == "0"       # graphs do not outlive a lease
    assert os.environ["UNMASK_COMPILE"] == "off"         # nor does a compile


def test_run_streams_from_the_worker_the_tokens_of_one_process(space):
    _, page = space
    args = (prompt_of(page), *SPEC, page.models[0])
    want = one_process(page, "stream", *args, page=True)
    got = in_worker(page, "stream", *args, page=True, client="203.0.113.7", every_s=0.0,
                    should_stop=lambda: False)
    forwards = [len(t.records) for t in got]             # a partial trace per forward, then the whole one
    assert len(got) >= 3 and forwards == sorted(set(forwards)) and forwards[-1] == len(want[-1].records)
    assert tokens(got[-1]) == tokens(want[-1])


def test_compare_runs_two_leases_at_once(space):
    from explorer.page.compare import both
    _, page = space
    specs = [SPEC, parse_spec("ar")]
    want = [one_process(page, "stream", prompt_of(page, 1), *s, page.models[0], page=True)[-1] for s in specs]
    pairs = list(both(page, prompt_of(page, 1), page.models[0], specs, should_stop=lambda: False))
    assert pairs and [tokens(t) for t in pairs[-1][:2]] == [tokens(t) for t in want] and pairs[-1][2] == (True, True)


def test_branch_and_the_api_branch_give_the_one_process_tokens(space):
    _, page = space
    model = page.models[0]
    base = one_process(page, "stream", prompt_of(page, 2), *SPEC, model, page=True)[-1]
    branch = {"step": 2, "force": None, "spec": "ar"}
    want = one_process(page, "branch_from", base, branch, model, page=True)[-1]
    got = in_worker(page, "branch_from", base, branch, model, page=True, client="x", should_stop=lambda: False)
    assert tokens(got[-1]) == tokens(want) and got[-1].meta.branch == want.meta.branch
    api = in_worker(page, "branch_stream", prompt_of(page, 2), *SPEC, model, '{"step": 2, "spec": "ar"}',
                    page=True, client="x", every_s=0.5, should_stop=lambda: False)
    assert tokens(api[-1]) == tokens(want)


def test_the_decode_api_and_a_visitors_error(space):
    _, page = space
    args = (prompt_of(page, 3), *SPEC, page.models[0])
    want = one_process(page, "stream", *args, page=True)[-1]
    got = in_worker(page, "stream", *args, page=True, client="x", every_s=0.5, first_at_once=False,
                    should_stop=lambda: False)
    assert tokens(got[-1]) == tokens(want)
    with pytest.raises(UserError, match="The prompt is empty"):     # its message, not only its class
        list(page.service.stream("  ", *SPEC, page.models[0], page=True))


def test_sweep_reports_progress_and_the_one_process_rows(space):
    _, page = space
    specs, keys = ["threshold:tau=0.9,block_size=8", "ar"], ("spec", "accuracy", "outcomes", "nfe")
    model = page.models[0]
    want = one_process(page, "sweep_stream", specs, 4, model=model, task="arith")[-1]
    seen = []
    got = in_worker(page, "sweep_stream", specs, 4, model=model, task="arith", client="x",
                    should_stop=lambda: False, progress=lambda i, total: seen.append((i, total)))
    assert [{k: r.get(k) for k in keys} for r in got[-1]] == [{k: r.get(k) for k in keys} for r in want]
    assert seen and seen[-1][1] >= 4


def test_the_workers_engine_time_is_charged_to_the_gates_ledger(space):
    """The worker's engine loop has a ledger of its own: what it charges the visitor's flow comes back with the
    values, so the page's gate (which holds the app process's ledger) orders by engine time on ZeroGPU too."""
    _, page = space
    ledger, flow = page.gate.ledger, ("198.51.100.0/24", "198.51.100.9", "a session")
    assert ledger is jobs.engine_loop().ledger
    ledger.enter(flow)                                   # as the gate does while the request holds its place
    try:
        before = ledger.service[flow]
        got = in_worker(page, "stream", prompt_of(page, 5), *SPEC, page.models[0], page=True, client=flow,
                        should_stop=lambda: False)
        charged, own = ledger.service[flow] - before, got[-1].meta.wall_s     # own: its rule's time alone
        assert charged > own / 2 > 0                     # its rounds' time and its rule's (measured apart: ~own)
        assert ledger.service[flow[:1]] - ledger.begun[flow[:1]] >= charged      # its pool's account too
    finally:
        ledger.leave(flow)


@pytest.fixture
def slow_rounds(space, monkeypatch):
    """Every round of the engine loop takes 50 ms more, counted across processes; workers forked from now on."""
    from tests import spaces_emulation
    spaces_emulation.shutdown()                      # the idle worker predates the patch
    count, run_round = multiprocessing.get_context("fork").Value("i", 0), scheduler.run_round

    def slow(reqs):
        time.sleep(0.05)
        with count.get_lock():
            count.value += 1
        return run_round(reqs)
    monkeypatch.setattr(scheduler, "run_round", slow)
    yield count
    spaces_emulation.shutdown()


def stops_within_a_second(count, leave) -> None:
    t0 = time.monotonic()
    leave()
    assert time.monotonic() - t0 < 1.5, "the lease did not end promptly"
    time.sleep(0.3)
    rounds = count.value
    time.sleep(0.6)
    assert count.value == rounds, "the worker kept decoding after its caller left"
    assert rounds < 60                        # a whole decode takes > 100 rounds


@pytest.mark.parametrize("how", ["should_stop", "close"])
def test_a_caller_who_leaves_ends_the_workers_decode(space, slow_rounds, how):
    _, page = space
    leave, gen = threading.Event(), None
    gen = page.service.stream(prompt_of(page), "threshold", {"tau": 1.0, "block_size": 32, "gen_length": 128},
                              page.models[0], page=True, every_s=0.0, should_stop=leave.is_set)
    assert next(gen) is not None                        # it streams
    if how == "close":
        stops_within_a_second(slow_rounds, gen.close)
    else:
        stops_within_a_second(slow_rounds, lambda: (leave.set(), list(gen)))


def test_a_worker_forked_while_the_parent_holds_its_locks_decodes(space):
    """A fork copies a lock as it is: held by a thread of the parent (a visitor's model load, the engine thread
    between rounds), it stays held in the worker, where that thread does not exist."""
    from tests import spaces_emulation
    _, page = space
    spaces_emulation.shutdown()                          # the next call forks a worker now, with the locks held
    args = (prompt_of(page, 4), *SPEC, page.models[0])
    want = one_process(page, "stream", *args, page=True)[-1]
    with page.service._lock, jobs.engine_loop().cond:
        gen = page.service.stream(*args, page=True, client="x", should_stop=lambda: False)
        first = next(gen)
    assert tokens([first, *gen][-1]) == tokens(want)
