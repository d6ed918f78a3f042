"""The static path's memory (engine/models/static.py, engine/models/slots.py): a budget for graphs and pools, idle
pools dropped, growth one layer at a time, an overflow refused for its decode alone; and a graph captured and
replayed where a CUDA device exists (skipped elsewhere, CI included: docs/architecture.md names the skip)."""

import gc

import pytest
import torch

from engine.decoders import build_decoder, parse_spec
from engine.errors import CapacityError
from engine.models import slots
from engine.models.static import StaticPath
from engine.runtime.engine_loop import Job
from engine.runtime.jobs import configure
from engine.runtime.loop import Generation
from engine.models.memory import LEDGER
from engine.tasks import get_task

PROMPTS = [p.prompt for p in get_task("arith").problems("test", 2, seed=4)]


@pytest.fixture
def tiny(monkeypatch):
    from engine.models.model import load_model
    monkeypatch.setenv("UNMASK_STATIC", "on")
    return load_model("tiny", device="cpu")


def gen(model, prompt, spec):
    name, params = parse_spec(spec)
    return Generation(model, prompt, build_decoder(name, **params))


def test_an_overflow_fails_its_decode_alone(tiny, monkeypatch):
    """A decode whose cache row is too small ends with a one-line CapacityError before anything is written; the
    decode sharing its rounds finishes with the tokens it writes alone."""
    want = gen(tiny, PROMPTS[1], "threshold:block_size=8,gen_length=8").run().meta.token_ids
    short = gen(tiny, PROMPTS[1], "threshold:block_size=8,gen_length=8")        # its row: 256 positions
    monkeypatch.setattr(slots, "capacity", lambda n: 32)                        # the long decode's row: 32
    long = gen(tiny, PROMPTS[0], "threshold:block_size=8,gen_length=40")
    loop = configure(max_running=2, round_tokens=1 << 20)
    handles = loop.submit_many([Job(long.requests), Job(short.requests)])
    with pytest.raises(CapacityError, match="its cache row holds 32"):
        handles[0].result(timeout=60)
    assert handles[1].result(timeout=60).meta.token_ids == want


def test_past_the_budget_a_decode_keeps_a_dynamic_cache(tiny, monkeypatch):
    path = StaticPath.of(tiny)
    want = gen(tiny, PROMPTS[0], "threshold:block_size=8").run()
    monkeypatch.setattr(LEDGER, "budget", lambda: 0)
    assert path.slot_cache(100) is None
    got = gen(tiny, PROMPTS[0], "threshold:block_size=8").run()
    assert got.meta.token_ids == want.meta.token_ids
    assert any(k.startswith("eager") for k in got.meta.forward_path)


def test_an_idle_pool_goes_and_growth_keeps_the_rows(tiny):
    path = StaticPath.of(tiny)
    a = path.slot_cache(100)
    pool = a.pool
    pool.keys[0][a.row].fill_(7.0)
    b = path.slot_cache(100)                           # the pool grows: a's row is copied, layer by layer
    assert pool.rows == 2 and b.pool is pool and bool((pool.keys[0][a.row] == 7).all())
    assert pool.bytes() == 3 * pool.bytes(0)           # two rows and the pad row
    del a, b
    gc.collect()
    assert pool.idle
    path.slot_cache(600)                               # another capacity: the idle pool is dropped
    assert pool.S not in path.pools


@pytest.mark.skipif(not torch.cuda.is_available(), reason="captures a CUDA graph: needs a CUDA device (CI has none)")
def test_a_captured_graph_replays_the_eager_call(monkeypatch):
    """On a GPU: a bucket's graph is captured on first use and its replay gives the eager call's tokens."""
    from engine.models.model import load_model
    monkeypatch.setenv("UNMASK_STATIC", "on")
    monkeypatch.setenv("UNMASK_CUDA_GRAPHS", "1")
    m = load_model("tiny", device="cuda")
    graphed = gen(m, PROMPTS[0], "threshold:block_size=8").run()
    assert StaticPath.of(m).captured > 0 and "cuda graph" in graphed.meta.forward_path
    monkeypatch.setenv("UNMASK_CUDA_GRAPHS", "0")
    eager = gen(m, PROMPTS[0], "threshold:block_size=8").run()
    assert graphed.meta.token_ids == eager.meta.token_ids
