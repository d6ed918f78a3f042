"""Batched decoding across problems (engine.batch): every problem's tokens, NFE and records equal its batch-1 decode."""

from __future__ import annotations

import numpy as np
import pytest

from engine.bench import run_bench
from engine.batch import run_batched
from engine.decoders import build_decoder
from engine.loop import Generation
from engine.tasks import get_task

SPECS = ["ar", "llada:block_size=4,steps=2", "threshold:tau=0.5,block_size=4", "tspd:block_size=4,controller=heuristic",
         "edit:block_size=4,tau=0.5", "wino:block_size=4", "remdm:block_size=4,steps=2", "eb:block_size=4",
         "s2d2:block_size=4,router=always", "threshold:tau=0.5,block_size=4,use_cache=0,temperature=1.0"]
FLOATS = ("confidence", "margin", "entropy")


def same_records(a, b) -> None:
    assert a.generated_ids == b.generated_ids and a.nfe == b.nfe and len(a.records) == len(b.records)
    for r1, r2 in zip(a.records, b.records):
        assert r1.kind == r2.kind and (r1.tokens_after == r2.tokens_after).all() and (r1.reason == r2.reason).all()
        for f in FLOATS:      # a padded batch sums in another order: the last bits may differ
            np.testing.assert_allclose(getattr(r1, f), getattr(r2, f), atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("spec", SPECS)
def test_batched_decodes_equal_batch_one(adapter, spec):
    from engine.spec import parse_spec
    name, params = parse_spec(spec)
    probs = get_task("arith").problems("test", 6, seed=1)
    jobs = [lambda view, p=p, i=i: Generation(view, p.prompt, build_decoder(name, seed=i, gen_length=24, **params)).run()
            for i, p in enumerate(probs)]
    alone = [job(adapter) for job in jobs]
    together = run_batched(adapter, jobs, 4)
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

    def job(view, i):
        if i == 1:
            raise RuntimeError("boom")
        return Generation(view, probs[i].prompt, build_decoder("ar", gen_length=8)).run()
    with pytest.raises(RuntimeError, match="boom"):
        run_batched(adapter, [lambda v, i=i: job(v, i) for i in range(3)], 3)


def test_batching_experiment_reports_equal_rows(adapter):
    from engine.experiments.batching import batching, report
    rows = batching(adapter, "arith", 6, "threshold:tau=0.5,block_size=4", sizes=(1, 3))
    assert [r["same_rows"] for r in rows] == [True, True] and "| 3 |" in report(rows)
    from engine.experiments.batching import page_sweep
    sw = page_sweep(adapter, "arith", 3, specs=["ar", "threshold:tau=0.5,block_size=4"], sizes=(1, 3))
    assert [r["same_rows"] for r in sw] == [True, True] and sw[0]["decodes"] == 6
