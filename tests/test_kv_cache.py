"""Fast-dLLM's dual cache on full-attention families: token for token with a test-side generate_with_dual_cache,
which splices the stale K/V in by another mechanism (hooks on the key/value projections of whole-canvas forwards),
plus what each record says about fresh and stale K/V and the drift."""

from __future__ import annotations

import pytest
import torch

from engine.decoders import build_decoder
from engine.errors import ConfigError
from engine.runtime.loop import Generation
from engine.models.model import load_model
from tests.families import StaleKV, write_llada, write_qwen2_family
from engine.runtime.jobs import drive

PROMPT = "Ann has 3 apples . She buys 5 more ."


@pytest.fixture(scope="module")
def full_models(tmp_path_factory):
    root = tmp_path_factory.mktemp("kv")
    return dict(llada=load_model(str(write_llada(root / "llada")[0]), device="cpu"),
                dream=load_model(str(write_qwen2_family(root / "dream", "Dream")), device="cpu"))


def reference_dual_cache(a, prompt_ids, gen_length, block_length, steps=None, tau=None):
    """``generate_with_dual_cache`` (Fast-dLLM llada/generate.py; greedy, low confidence) from its description: per
    block a whole-canvas forward that also stores every position's K/V and commits, then block-only forwards against
    the stored K/V until the block is full. Fixed steps (``steps`` per block) or ``tau`` (the most confident masked
    slot always, the others while not below τ). [MASK] is never predicted, as in the engine."""
    x = torch.tensor(prompt_ids + [a.mask_token_id] * gen_length)
    P, n = len(prompt_ids), len(prompt_ids) + gen_length
    hooks = StaleKV(a.model)
    try:
        for lo in range(P, n, block_length):
            hi = lo + block_length
            quota = [block_length // steps + (j < block_length % steps) for j in range(steps)] if steps else None
            hooks.block, j = None, 0
            while (x[lo:hi] == a.mask_token_id).any():
                logits = a.forward(x, torch.ones(n, n, dtype=torch.bool), torch.arange(n))[lo:hi].double()
                hooks.block = (lo, hi)                   # every later forward of the block reads the stale K/V
                logits[:, a.mask_token_id] = float("-inf")
                p = torch.softmax(logits, -1)
                x0 = p.argmax(-1)
                masked = x[lo:hi] == a.mask_token_id
                conf = torch.where(masked, p.gather(-1, x0[:, None])[:, 0], torch.tensor(float("-inf")).double())
                order = torch.argsort(conf, descending=True)[: int(masked.sum())]
                keep = order[: quota[j]] if quota else torch.tensor(
                    [int(order[0])] + [int(i) for i in order[1:] if conf[i] >= tau])
                x[lo + keep] = x0[keep]
                j += 1
    finally:
        hooks.close()
    return x[P:].tolist()


@pytest.mark.parametrize("setting", [dict(decoder="llada", steps=4), dict(decoder="llada", steps=2),
                                     dict(decoder="threshold", tau=0.3), dict(decoder="threshold", tau=0.9)])
def test_llada_dual_cache_follows_fast_dllm(full_models, setting):
    a = full_models["llada"]
    name = setting.pop("decoder")
    tr = Generation(a, PROMPT, build_decoder(name, block_size=4, gen_length=12, stop_at_eos=False, kv_cache="dual",
                                             **setting)).run()
    ref = reference_dual_cache(a, tr.meta.prompt_ids, 12, 4, steps=setting.get("steps"), tau=setting.get("tau"))
    assert tr.meta.final_tokens[tr.meta.prompt_len:] == ref
    assert tr.meta.cache.startswith("dual")
    plain = Generation(a, PROMPT, build_decoder(name, block_size=4, gen_length=12, stop_at_eos=False, **setting)).run()
    gaps = [abs(x.confidence - y.confidence).max() for x, y in zip(tr.records, plain.records) if x.block == y.block]
    assert gaps[0] < 1e-6 and max(gaps) > 1e-6      # a block's first forward is exact; later ones read stale K/V


def test_records_say_which_kv_were_fresh_and_the_drift(full_models):
    a = full_models["dream"]
    runs = {kv: Generation(a, PROMPT, build_decoder("llada", block_size=4, steps=4, gen_length=8, stop_at_eos=False,
                                                    kv_cache=kv, measure_drift=True)).run()
            for kv in ("prefix", "dual")}
    for kv, tr in runs.items():
        n = tr.meta.gen_end
        for r in tr.records:
            lo, hi = int(r.positions[0]), int(r.positions[-1]) + 1
            first = r.step_in_block == 0
            s = lo - 1                                    # Dream: the row before the block is recomputed too
            assert r.field("kv_fresh") == ([0, n] if first else [s, n] if kv == "prefix" else [s, hi])
            assert (r.field("drift") == 0.0) if first else r.field("drift") > 0.0      # random weights drift
    plain = Generation(a, PROMPT, build_decoder("llada", block_size=4, steps=4, gen_length=8, stop_at_eos=False,
                                                kv_cache="dual")).run()
    assert plain.generated_ids == runs["dual"].generated_ids and plain.nfe == runs["dual"].nfe   # measuring is free
    assert not plain.records[1].has("drift")


def test_dual_is_refused_on_block_causal_models(adapter):
    with pytest.raises(ConfigError, match="block-causal"):
        Generation(adapter, [1, 5, 6], build_decoder("threshold", kv_cache="dual"))


@pytest.mark.parametrize("kv", ["prefix", "dual"])
def test_shifted_model_reads_the_row_before_the_block(full_models, kv):
    """Dream predicts slot i from row i − 1: a cached forward recomputes the row before the block, so at a
    block's first later forward (nothing committed since the full forward) the block's logits equal the full
    forward's, the first slot's included."""
    a = full_models["dream"]
    from engine.runtime.runners import make_runner
    pol = build_decoder("llada", block_size=4, steps=4, gen_length=8, kv_cache=kv)
    r = make_runner(a, a.encode_prompt(PROMPT), pol.cfg)
    lo = r.P
    full, _ = drive(r.forward("draft", lo, lo + 4))
    again, _ = drive(r.forward("draft", lo, lo + 4))
    assert r.fresh == (lo - 1, lo + 4 if kv == "dual" else r.end)
    torch.testing.assert_close(again, full, atol=1e-4, rtol=0)


def test_kv_cache_experiment_runs_every_mode_at_every_length():
    from tools.experiments import kvcache
    a = kvcache.llada_shaped(hidden=64, layers=1)
    rows = kvcache.run(a, gens=(32,), block=16, steps=4)
    assert [r["kv_cache"] for r in rows] == ["none", "prefix", "dual"] and {r["nfe"] for r in rows} == {8}
    assert rows[0]["vs_none"] == 1.0 and "| 32 | dual |" in kvcache.report(rows, a)


def test_bench_reports_the_mean_drift(full_models):
    from engine.harness.bench import run_bench
    rows = run_bench(full_models["llada"], "arith", 2, ["llada:block_size=4,steps=4,gen_length=8,kv_cache=dual,"
                                                        "measure_drift=1", "llada:block_size=4,steps=4,gen_length=8"])
    assert rows[0]["drift_mean"] > 0 and "drift_mean" not in rows[1]
