"""What every bench row carries for a reviewer: distinct prompts, Wilson intervals, per-problem outcomes and seeds,
and NFE counted as the papers count it."""

import pytest

from engine.harness import stats
from engine.harness.bench import problem_seed, run_bench
from engine.models.model import load_model


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny", device="cpu")


def test_rows_carry_intervals_outcomes_and_distinct_prompts(tiny):
    seen = []
    rows = run_bench(tiny, "arith", 6, ["ar", "llada:block_size=8,steps=8,temperature=1",
                                        "threshold:tau=0.9,block_size=8,use_cache=0"],
                     on_trace=lambda spec, i, prob, tr: seen.append((spec, i, tr.meta.seed)))
    for r in rows:
        assert r["n"] == 6 and r["n_prompts"] == 6 and len(r["outcomes"]) == 6
        k = r["outcomes"].count("1")
        assert r["accuracy"] == k / 6 and r["accuracy_ci95"] == list(stats.wilson(k, 6))
    # every problem its own seed, the same across decoders whose spec seed is the same (paired comparisons)
    seeds = {(spec, i): s for spec, i, s in seen}
    assert len({seeds[("ar", i)] for i in range(6)}) == 6
    assert all(seeds[("ar", i)] == seeds[("llada:block_size=8,steps=8,temperature=1", i)] == problem_seed(0, 0, i)
               for i in range(6))
    assert len(seen) == 18


def test_nfe_paper_adds_the_prefill_and_one_store_per_block(tiny):
    ar, llada, uncached = run_bench(tiny, "arith", 3, ["ar", "llada:block_size=8,steps=8",
                                                       "llada:block_size=8,steps=8,use_cache=0"])
    # AR is B = 1: every token a block, so SDAR's loop runs a denoise and a store forward per token, plus the prefill
    assert ar["nfe_paper"] == pytest.approx(2 * ar["nfe"] + 1)
    assert llada["nfe_paper"] > llada["nfe"]
    assert uncached["nfe_paper"] == uncached["nfe"]          # no cache: nothing to prefill or store


def test_problem_seed_is_fixed_and_spreads():
    assert problem_seed(0, 0, 5) == problem_seed(0, 0, 5)
    assert len({problem_seed(0, 0, i) for i in range(1000)}) == 1000
    assert problem_seed(1, 0, 0) != problem_seed(0, 0, 0) != problem_seed(0, 1, 0)


def test_progress_on_a_pipe_is_plain_lines(capsys):
    from engine.harness.progress import progress
    tick = progress("bench story", every_s=3600)
    for i in range(1, 21):
        tick(i, 20)
    err = capsys.readouterr().err
    assert "\r" not in err and err.count("\n") == 2                 # the first call and the end, nothing between
    assert err.splitlines()[-1].startswith("bench story: 20/20 problems")


def test_a_bench_row_is_a_typed_record_and_its_json_round_trips(sdar_dir):
    """Every key of a row is a declared field of BenchRow; the optional ones appear only where they apply."""
    from dataclasses import fields

    from engine.harness.bench import run_bench
    from engine.harness.bench_row import BenchRow
    from engine.models.model import load_model
    (r,) = run_bench(load_model(str(sdar_dir), device="cpu"), "arith", 2, ["threshold:tau=0.9,block_size=4"])
    declared = {f.name for f in fields(BenchRow)}
    assert set(r) <= declared and not set(r) & {"target_forwards", "drift_mean", "renoised_share"}
    assert BenchRow.from_json(r).to_json() == r


CARD_COLUMNS = ("target_forwards", "draft_forwards", "time_ratio", "param_ratio", "target_equiv_nfe", "tpf",
                "cost_model", "acceptance_rate")


def test_a_simsd_row_counts_tokens_per_target_equivalent_forward():
    """SimSD's row: TPF is tokens per (target forwards + time ratio × drafter forwards), not per forward of
    either model (the row once failed to build: two values for tpf)."""
    (r,) = run_bench(load_model("unmask-tasks-small", device="cpu"), "arith", 2, ["simsd:block_size=4"])
    tokens = r["tokens_per_sample"] * r["n"]
    equiv = r["target_forwards"] + r["time_ratio"] * r["draft_forwards"]
    assert r["target_equiv_nfe"] == pytest.approx(equiv)
    assert r["tpf"] == pytest.approx(tokens / (equiv * r["n"]))
    assert 0 < r["time_ratio"] < 1 and r["acceptance_rate"] > 0
    from engine.harness.bench_row import BenchRow
    back = BenchRow.from_json(r)     # the card's columns are the row's extra, flat in its JSON
    assert set(back.extra) == set(CARD_COLUMNS) and back.to_json() == r
