"""Batched decoding across problems (engine.runtime.scheduler, engine.runtime.batch): every problem's tokens, NFE and
records equal its batch-1 decode."""

from __future__ import annotations

import os

import numpy as np
import torch
import pytest

from engine.harness.bench import run_bench
from engine.runtime.jobs import Scheduler, run_batched
from engine.runtime.scheduler import Forward
from engine.decoders import build_decoder
from engine.runtime.loop import Generation
from engine.tasks import get_task

SPECS = ["ar", "llada:block_size=4,steps=2", "threshold:tau=0.5,block_size=4", "tspd:block_size=4,controller=heuristic",
         "edit:block_size=4,tau=0.5", "wino:block_size=4", "remdm:block_size=4,steps=2", "eb:block_size=4",
         "s2d2:block_size=4,router=always", "threshold:tau=0.5,block_size=4,use_cache=0,temperature=1.0"]
FLOATS = ("confidence", "margin", "entropy")


def same_records(a, b) -> None:
    assert a.generated_ids == b.generated_ids and a.nfe == b.nfe and len(a.records) == len(b.records)
    for r1, r2 in zip(a.records, b.records):
        assert r1.kind == r2.kind and (r1.tokens_after == r2.tokens_after).all() and (r1.reason == r2.reason).all()
        for f in FLOATS:      # a projection over more rows may sum in another order: the last bits may differ
            # (float32 at p ≈ 0.6: up to ~2e-5 seen with the 2 × 96 drafter; tokens and reasons stay exact)
            np.testing.assert_allclose(getattr(r1, f), getattr(r2, f), atol=5e-5, equal_nan=True)


@pytest.mark.parametrize("spec", SPECS)
def test_batched_decodes_equal_batch_one(adapter, spec):
    from engine.catalogue.spec import parse_spec
    name, params = parse_spec(spec)
    probs = get_task("arith").problems("test", 6, seed=1)
    make = [lambda p=p, i=i: Generation(adapter, p.prompt, build_decoder(name, seed=i, gen_length=24, **params))
            for i, p in enumerate(probs)]
    alone = [m().run() for m in make]
    together = run_batched([lambda m=m: m().requests() for m in make], 4)
    for a, b in zip(alone, together):
        same_records(a, b)


def test_bench_rows_equal_batch_one(adapter):
    drop = ("wall_s", "tokens_per_s", "speedup")
    one = run_bench(adapter, "arith", 9, ["threshold:tau=0.5,block_size=4", "ar"])
    many = run_bench(adapter, "arith", 9, ["threshold:tau=0.5,block_size=4", "ar"], batch=4)
    assert [{k: v for k, v in r.items() if k not in drop} for r in one] == \
        [{k: v for k, v in r.items() if k not in drop} for r in many]


def test_a_failing_decode_raises_after_the_others(adapter):
    probs = get_task("arith").problems("test", 3)

    ended = []

    def job(i):
        g = Generation(adapter, probs[i].prompt, build_decoder("ar", gen_length=8))
        if i == 1:
            yield from g.requests()
            raise RuntimeError("boom")
        trace = yield from g.requests()
        ended.append(i)
        return trace
    with pytest.raises(RuntimeError, match="boom"):
        run_batched([lambda i=i: job(i) for i in range(3)], 3)
    assert ended == [0, 2]


def test_batching_experiment_reports_equal_rows(adapter):
    from tools.experiments.batching import batching, report
    rows = batching(adapter, "arith", 6, "threshold:tau=0.5,block_size=4", sizes=(1, 3), repeats=2)
    assert [r["same_rows"] for r in rows] == [True, True] and "| 3 |" in report(rows)
    assert rows[0]["vs_batch_1"] == 1.0 and rows[1]["vs_batch_1_range"][0] <= rows[1]["vs_batch_1"]
    from tools.experiments.batching import page_sweep
    sw = page_sweep(adapter, "arith", 3, specs=["ar", "threshold:tau=0.5,block_size=4"], sizes=(1, 3),
                    repeats=2)
    assert [r["same_rows"] for r in sw] == [True, True] and sw[0]["decodes"] == 6


def _requests(adapter, shapes, seed=0):
    """Requests of (query length, cache length), each cache filled by a causal forward of random tokens."""
    g, out = torch.Generator().manual_seed(seed), []
    for i, (q, c) in enumerate(shapes):
        cache = adapter.new_cache()
        if c:
            adapter.forward(torch.randint(5, 30, (c,), generator=g), torch.ones(c, c, dtype=torch.bool).tril(),
                            torch.arange(c), cache)
        mask = torch.rand(q, c + q, generator=g) < 0.7
        mask[:, c:] |= torch.eye(q, dtype=torch.bool)             # every query sees itself
        out.append(Forward(adapter, torch.randint(5, 30, (q,), generator=g), mask, torch.arange(c, c + q), cache))
    return out


@pytest.mark.parametrize("family", ["sdar", "fastdllm", "llada"])
@pytest.mark.parametrize("forward", ["packed", "padded", "ragged"])
def test_each_layout_gives_every_request_its_own_logits_and_cache(adapter, tmp_path, family, forward):
    """Mixed shapes (a prefill beside steps with caches); a shifted model (Fast-dLLM v2) and a full-attention one."""
    from engine.runtime import batch
    from engine.models.model import load_model
    from tests.families import write_llada, write_qwen2_family
    path = write_qwen2_family(tmp_path / "m", "Fast_dLLM_Qwen") if family == "fastdllm" else \
        write_llada(tmp_path / "m")[0] if family == "llada" else None
    model = adapter if path is None else load_model(str(path), device="cpu")
    shapes = [(8, 12), (16, 12), (30, 0), (8, 5)]
    together, alone = _requests(model, shapes), _requests(model, shapes)
    if forward == "ragged":
        from engine.models import ragged
        assert ragged.installed(model)
    outs = getattr(batch if forward != "ragged" else ragged, f"{forward}_forward")(model, together)
    for r, o, a in zip(together, outs, alone):
        want = model.forward(a.ids, a.mask, a.pos, a.cache)
        np.testing.assert_allclose(o.numpy(), want.numpy(), atol=1e-5 if forward == "ragged" else 1e-4)
        for x, y in zip(r.cache.layers, a.cache.layers):       # each cache grew by its own K/V only
            np.testing.assert_allclose(x.keys.numpy(), y.keys.numpy(), atol=1e-5)


def _splice_requests(adapter, spans, seed=0):
    """Fast-dLLM's dual cache (``SpliceCache``) as the engine's later forwards of a block see it: the canvas's K/V
    from its first forward, the block [a, b) run again with tokens the first forward did not see (its stale K/V in
    the cache must not be read), a random mask whose columns are in position order (prefix, the block, suffix)."""
    from engine.runtime.cache import SpliceCache
    g, out = torch.Generator().manual_seed(seed), []
    for n, a, b in spans:
        full = adapter.new_cache()
        adapter.forward(torch.randint(5, 30, (n,), generator=g), torch.ones(n, n, dtype=torch.bool), torch.arange(n),
                        full)
        mask = torch.rand(b - a, n, generator=g) < 0.7
        mask[:, a:b] |= torch.eye(b - a, dtype=torch.bool)       # every query sees itself
        out.append(Forward(adapter, torch.randint(5, 30, (b - a,), generator=g), mask, torch.arange(a, b),
                           SpliceCache(full, a, b)))
    return out


@pytest.fixture(scope="module")
def llada(tmp_path_factory):
    from engine.models.model import load_model
    from tests.families import write_llada
    return load_model(str(write_llada(tmp_path_factory.mktemp("llada") / "m")[0]), device="cpu")


@pytest.mark.parametrize("forward", ["packed", "padded", "ragged"])
def test_each_layout_reads_a_splice_caches_fresh_block_not_its_stale_one(llada, forward):
    """Dual-cache requests of different canvases and blocks (one at the canvas's start, one at its end) beside a
    plain cached request: each gets the logits of its own forward, and no cache changes (a splice stores nothing).
    Before: packed and padded raised (their cache held the whole canvas, the stale block included) and ragged
    attended to the stale block's K/V."""
    from engine.models import ragged
    from engine.runtime import batch
    spans = [(24, 8, 16), (32, 24, 32), (16, 0, 8)]
    together = _splice_requests(llada, spans) + _requests(llada, [(8, 12)], seed=1)
    alone = _splice_requests(llada, spans) + _requests(llada, [(8, 12)], seed=1)
    before = [[layer.keys.clone() for layer in r.cache.layers] for r in together[:3]]
    outs = getattr(batch if forward != "ragged" else ragged, f"{forward}_forward")(llada, together)
    for o, a in zip(outs, alone):
        np.testing.assert_allclose(o.numpy(), llada.forward(a.ids, a.mask, a.pos, a.cache).numpy(), atol=1e-4)
    for r, keys in zip(together, before):
        assert all(torch.equal(layer.keys, k) for layer, k in zip(r.cache.layers, keys))
    np.testing.assert_allclose(together[3].cache.layers[0].keys.numpy(), alone[3].cache.layers[0].keys.numpy(),
                               atol=1e-5)


@pytest.mark.parametrize("forward", ["packed", "padded", "ragged"])
def test_each_layout_keeps_llada_bf16_caches_fp32_keys_and_bf16_values(tmp_path, forward):
    """LLaDA in bf16 (a GPU's dtype) keeps its keys in fp32 and its values in bf16 (``engine.models.precision``):
    a layout's round cache keeps each dtype, so the logits are each request's own (bf16: to a few ulps) and every
    cache keeps its dtypes. Before: padded built the values in the keys' fp32 and raised (float != BFloat16)."""
    from engine.models import ragged
    from engine.models.model import load_model
    from engine.runtime import batch
    from tests.families import write_llada
    model = load_model(str(write_llada(tmp_path / "m")[0]), device="cpu", dtype=torch.bfloat16)
    make = lambda: _requests(model, [(8, 12), (16, 5)]) + _splice_requests(model, [(24, 8, 16)])  # noqa: E731
    together, alone = make(), make()
    outs = getattr(batch if forward != "ragged" else ragged, f"{forward}_forward")(model, together)
    for r, o, a in zip(together, outs, alone):
        np.testing.assert_allclose(o.numpy(), model.forward(a.ids, a.mask, a.pos, a.cache).numpy(), atol=0.05,
                                   rtol=0.02)
        assert {(x.keys.dtype, x.values.dtype) for x in r.cache.layers} == {(torch.float32, torch.bfloat16)}


def test_layout_is_ragged_on_a_cpu_and_else_follows_the_cost_of_padding_against_attention(adapter):
    from engine.runtime.batch import cheaper_layout, layout
    beside_steps = [(30, 0), (4, 40), (4, 40), (4, 40)]           # a prefill beside steps: padding would dominate
    assert layout(adapter, _requests(adapter, beside_steps)) == "ragged"
    assert cheaper_layout(adapter, _requests(adapter, beside_steps)) == "packed"
    assert cheaper_layout(adapter, _requests(adapter, [(60, 0)] * 6)) == "padded"   # full canvases: attention dominates


def test_unmask_layout_forces_a_layout_on_any_device_and_is_checked(adapter, sdar_dir, monkeypatch):
    """CI runs a GPU's layouts on its CPU (tests/test_layouts.py); an operator may pin one. Ragged needs the
    attention wrapper: an eager-attention model keeps auto's choice."""
    from engine.models.model import load_model
    from engine.runtime.batch import layout
    from engine.settings import SettingError
    reqs = _requests(adapter, [(30, 0), (4, 40)])
    for name in ("packed", "padded", "ragged"):
        monkeypatch.setenv("UNMASK_LAYOUT", name)
        assert layout(adapter, reqs) == name
    eager = load_model(str(sdar_dir), device="cpu", attn_impl="eager")
    assert layout(eager, _requests(eager, [(30, 0), (4, 40)])) == "packed"
    monkeypatch.setenv("UNMASK_LAYOUT", "auto")
    assert layout(adapter, reqs) == "ragged"
    monkeypatch.setenv("UNMASK_LAYOUT", "flat")
    with pytest.raises(SettingError, match="UNMASK_LAYOUT='flat': must be one of auto, ragged, packed, padded"):
        layout(adapter, reqs)


@pytest.mark.parametrize("forward", ["packed", "padded"])
def test_canvases_without_a_cache_run_batched_without_one(tmp_path, forward, monkeypatch):
    """LLaDA's canvases keep no cache (kv_cache none): their batched forward gets none either (a fresh cache
    would store two K/V copies per layer that nobody reads), and each request still gets its own logits."""
    from engine.runtime import batch
    from engine.models.model import load_model
    from tests.families import write_llada
    model = load_model(str(write_llada(tmp_path / "m")[0]), device="cpu")
    g = torch.Generator().manual_seed(3)
    reqs = [Forward(model, torch.randint(5, 30, (n,), generator=g), torch.ones(n, n, dtype=torch.bool),
                    torch.arange(n), None) for n in (12, 20, 7)]
    caches, run = [], model.run
    monkeypatch.setattr(type(model), "run", lambda self, *a, **k: caches.append(a[3] if len(a) > 3 else None)
                        or run(*a, **k))
    outs = getattr(batch, f"{forward}_forward")(model, reqs)
    assert caches == [None]
    for r, o in zip(reqs, outs):
        np.testing.assert_allclose(o.numpy(), model.forward(r.ids, r.mask, r.pos).numpy(), atol=1e-4)


def test_the_splice_layouts_experiment_times_batched_against_apart_with_equal_tokens(monkeypatch):
    """tools.experiments.splice_layouts at toy size: each layout's dual-cache round batched and kept apart write the
    same tokens, and the kept-apart run really ran its splices one by one."""
    from engine.runtime import batch
    from tools.experiments import splice_layouts
    from tools.experiments.kvcache import llada_shaped
    monkeypatch.setenv("UNMASK_LAYOUT", "auto")
    sizes = []
    monkeypatch.setattr(batch, "eager_forwards", lambda a, reqs, f=batch.eager_forwards: sizes.append(
        (len(reqs), batch.batchable(reqs))) or f(a, reqs))
    rows = splice_layouts.run(llada_shaped(64, 2), "threshold:tau=0.9,block_size=8,kv_cache=dual", 2, 16, 1)
    assert [r["layout"] for r in rows] == ["ragged", "packed", "padded"] and all(r["same_tokens"] for r in rows)
    assert (2, True) in sizes and (2, False) in sizes and os.environ["UNMASK_LAYOUT"] == "auto"
    assert "| padded |" in splice_layouts.report(rows, llada_shaped(64, 1), "x", 2, 16)


def test_the_scheduler_refills_a_finished_decode_before_the_next_round(adapter):
    """Jobs of 3, 1, 1, 1 forwards, 2 at a time: rounds (j0, j1), (j0, j2), (j0, j3): three batched forwards."""
    seen = []

    def job(k, index):
        for _ in range(k):
            logits, stats = yield Forward(adapter, torch.tensor([5, 6]), torch.ones(2, 2, dtype=torch.bool),
                                          torch.arange(2), None)
            assert logits.shape == (2, adapter.vocab_size) and stats is None
            seen.append(index)
        return k
    s = Scheduler([lambda k=k, i=i: job(k, i) for i, k in enumerate([3, 1, 1, 1])], 2)
    assert [(i, r) for i, r, _ in s.events()] == [(1, 1), (2, 1), (0, 3), (3, 1)]
    assert s.rounds == 3 and seen == [0, 1, 0, 2, 0, 3]


def test_batched_runs_are_bitwise_repeatable(adapter):
    """Which decodes share a forward never depends on thread timing: two runs give the same floats to the bit."""
    probs = get_task("arith").problems("test", 10, seed=2)
    jobs = [lambda p=p, i=i: Generation(adapter, p.prompt, build_decoder("threshold", seed=i, gen_length=16,
                                                                         tau=0.5, block_size=4)).requests()
            for i, p in enumerate(probs)]
    a, b = run_batched(jobs, 3), run_batched(jobs, 3)
    for x, y in zip(a, b):
        assert all((r1.confidence == r2.confidence).all() for r1, r2 in zip(x.records, y.records))


def test_decodes_run_on_the_one_engine_thread_and_leave_the_switch_interval_alone(adapter):
    """No thread per decode and no process-wide setting: every decode's rules run on the engine loop's one thread,
    whichever thread submitted it (a second submitting thread adds no engine thread)."""
    import sys
    import threading
    from engine.runtime.jobs import engine_loop
    before, seen = sys.getswitchinterval(), []

    def job():
        seen.append((threading.current_thread(), sys.getswitchinterval()))
        return (yield from Generation(adapter, "1 + 2 =", build_decoder("ar", gen_length=4)).requests())
    run_batched([job] * 3, 2)
    threads = threading.active_count()
    other = threading.Thread(target=run_batched, args=([job] * 2, 2))
    other.start()
    other.join()
    assert seen == [(engine_loop().thread, before)] * 5 and threading.active_count() == threads


def test_a_batched_runs_time_shares_add_up_to_its_wall_time(adapter):
    """Each decode's share of the rounds it took part in, summed, is the run's wall time, so tokens/s of a batched
    bench is tokens over wall time."""
    import time
    probs = get_task("arith").problems("test", 12, seed=3)
    jobs = [lambda p=p, i=i: Generation(adapter, p.prompt, build_decoder("ar", seed=i, gen_length=16)).requests()
            for i, p in enumerate(probs)]
    seconds, t0 = {}, time.perf_counter()
    run_batched(jobs, 3, seconds)
    wall = time.perf_counter() - t0
    assert sorted(seconds) == list(range(12)) and 0.8 * wall < sum(seconds.values()) <= wall


def test_an_eager_attention_model_keeps_the_packed_and_padded_layouts(sdar_dir):
    """Eager attention is each modeling file's own (not in transformers' registry): nothing to wrap."""
    from engine.runtime.batch import layout
    from engine.models.model import load_model
    eager = load_model(str(sdar_dir), device="cpu", attn_impl="eager")
    assert layout(eager, _requests(eager, [(8, 12), (30, 0)])) == "packed"
    assert eager.model.config._attn_implementation == "eager"
    probs = get_task("arith").problems("test", 4, seed=4)
    make = [lambda p=p: Generation(eager, p.prompt, build_decoder("threshold", tau=0.5, block_size=4, gen_length=12))
            for p in probs]
    for a, b in zip([m().run() for m in make], run_batched([lambda m=m: m().requests() for m in make], 2)):
        same_records(a, b)


@pytest.mark.parametrize("model,spec", [("unmask-tasks-small", "simsd:block_size=8"),
                                        ("unmask-tasks-small", "simsd:block_size=8,acceptance=mrs,temperature=1"),
                                        ("unmask-uniform-small", "uniform")])
def test_the_drafter_and_canvas_requests_batch_too(model, spec):
    """SimSD's drafter forwards batch with the other decodes' (requests grouped by model); the uniform canvas's
    encoder and decoder forwards run alone inside the round. Either way each decode equals its batch-1 decode."""
    from engine.models.model import load_model
    from engine.runtime.resources import cached_loader
    from engine.catalogue.spec import parse_spec
    a, load = load_model(model, device="cpu"), cached_loader("cpu")
    name, params = parse_spec(spec)
    make = [lambda p=p, i=i: Generation(a, p.prompt, build_decoder(name, seed=i, gen_length=16, **params), load=load)
            for i, p in enumerate(get_task("arith").problems("test", 3, seed=5))]
    s = Scheduler([lambda m=m: m().requests() for m in make], 3)
    together = [r for _, r in sorted((i, r) for i, r, _ in s.events())]
    for x, y in zip([m().run() for m in make], together):
        same_records(x, y)
    assert s.rounds < sum(t.meta.nfe for t in together)       # rounds were shared
