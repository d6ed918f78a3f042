"""TSPD training on the trajectories it will see: labels against the reference decode, the per-answer operating
threshold, CE's coverage calibration (Monte Carlo), and the one training command end to end on a tiny model."""

import json

import numpy as np
import pytest

from engine.decoders.tspd.kalman import KalmanParams, TrendFilter
from engine.decoders import build_decoder
from engine.runtime.loop import Generation
from engine.models.model import load_model
from tools.training.collect import controller_rows, reference_split, rollouts
from tools.training.fit_ce import calibrate, coverage
from tools.training.train_controller import GRID, answer_point, main, operating_threshold
from tests.conftest import write_sdar_checkpoint


def test_operating_threshold_stops_at_the_first_point_over_budget():
    curve = [dict(tau_s=t, lost=c) for t, c in ((0.99, 0.0), (0.95, 0.005), (0.9, 0.02), (0.8, 0.0))]
    assert operating_threshold(curve, 0.01) == 0.95          # 0.8 is within budget but lies past a violation
    assert operating_threshold(curve, 0.03) == 0.8
    assert operating_threshold([dict(tau_s=0.99, lost=0.5)], 0.01) == 0.99      # nothing safe: the most careful


def test_answer_point_counts_broken_answers_by_the_checker():
    """An answer is broken when the reference's passes the checker and TSPD's does not; another valid answer (an
    uncertain task) or a different wrong one is no loss."""
    from types import SimpleNamespace as NS
    task = NS(verdict=lambda text, prob: "valid" if text in prob else "wrong")
    problems = [("a", "b"), ("a",), ("a",), ("c",)]
    refs = [NS(meta=NS(text=t)) for t in ("a", "a", "a", "x")]
    outs = ["b", "a", "z", "y"]                               # other valid, same, broken, wrong-for-wrong
    traces = [NS(meta=NS(text=t, generated_tokens=5), nfe=2, records=[]) for t in outs]
    pt = answer_point(task, NS(problems=problems, refs=refs, blocks=[16] * 4), traces, 0.9)
    assert pt["changed"] == 0.75 and pt["broken"] == 0.25 and pt["accuracy"] == 0.5 and pt["lost"] == 0.25
    pt = answer_point(task, NS(problems=problems, refs=refs, blocks=[16, 8, 8, 16]), traces, 0.9)
    assert pt["lost_by_block"] == {16: 0.0, 8: 0.5} and pt["lost"] == 0.5  # the budget holds at every B
    assert pt["reference_accuracy"] == 0.75 and pt["nfe_per_token"] == 0.4 and pt["tau_s"] == 0.9


def trend_trajectories(n: int, T: int, seed: int, q=(0.05, 0.01), r=0.2):
    """z from the local-linear-trend model itself: its true noise gives a known coverage."""
    rng = np.random.default_rng(seed)
    lvl, vel = rng.normal(0, 1, n), rng.normal(0, 0.3, n)
    Z = np.empty((n, T))
    for t in range(T):
        Z[:, t] = lvl + rng.normal(0, np.sqrt(r), n)
        lvl, vel = lvl + vel + rng.normal(0, np.sqrt(q[0]), n), vel + rng.normal(0, np.sqrt(q[1]), n)
    return Z, np.zeros((n, T), bool)


def test_scaling_the_noise_scales_sigma_and_keeps_the_mean():
    z, obs, flip = np.array([0.3, -1.0]), np.ones(2, bool), np.zeros(2, bool)
    a, b = TrendFilter(2, KalmanParams(0.05, 0.01, 0.25)), TrendFilter(2, KalmanParams(0.05, 0.01, 0.25).scaled(4.0))
    for t in range(5):
        a.step(z + 0.2 * t, obs, flip)
        b.step(z + 0.2 * t, obs, flip)
    (ma, sa), (mb, sb) = a.forecast(3), b.forecast(3)
    assert np.allclose(ma, mb) and np.allclose(sb, 2 * sa)


def test_calibrate_brings_a_timid_fit_to_the_target_coverage():
    Z, F = trend_trajectories(3000, 8, seed=0)
    timid = KalmanParams(0.5, 0.2, 1.0)                      # 10× the true noise: bounds far too wide
    assert coverage(Z, F, timid, 1.64)[0] > 0.985
    params, k = calibrate(Z, F, timid, 1.64, 0.95)
    assert k < 1 and coverage(Z, F, params, 1.64)[0] == pytest.approx(0.95, abs=0.003)
    Z2, F2 = trend_trajectories(3000, 8, seed=1)             # fresh trajectories: the calibration carries over
    assert coverage(Z2, F2, params, 1.64)[0] == pytest.approx(0.95, abs=0.015)


def test_on_policy_labels_compare_with_the_reference_decode(adapter, arith):
    split = reference_split(adapter, arith, "train", 3, block_sizes=(8,), gen_length=16)
    traces = rollouts(adapter, split, lambda B: build_decoder("threshold", tau=0.3, block_size=B, gen_length=16))
    rows = controller_rows(traces, split.refs)
    expect = []
    for tr, ref in zip(traces, split.refs):                   # the same labels, counted by hand
        final, mask = ref.meta.final_tokens, tr.meta.mask_token_id
        stops = [j for j in range(ref.meta.prompt_len, len(final)) if final[j] in ref.meta.stop_ids]
        eos = stops[0] if stops else len(final)
        for r in tr.records:
            for j in np.flatnonzero(r.tokens_before == mask):
                if r.positions[j] <= eos:
                    expect.append(int(r.candidate[j]) == final[min(int(r.positions[j]), len(final) - 1)])
    assert rows.label.tolist() == [float(e) for e in expect] and len(expect) > 0


def test_training_command_writes_a_controller_tspd_then_uses(tmp_path, arith):
    model_dir = write_sdar_checkpoint(tmp_path / "m")
    # two problems a split (one at each block size, 16 and 8): the command's whole path, at half the decodes of four
    out = main(["--model", str(model_dir), "--n-train", "2", "--n-val", "2", "--n-select", "2", "--rounds", "1",
                "--epochs", "1"])
    card = json.loads((model_dir / "tspd_controller.json").read_text())
    ce = json.loads((model_dir / "ce.json").read_text())
    assert card["threshold"] == out["threshold"] in GRID
    assert card["threshold"] == operating_threshold(card["val_curve"], card["budget"])
    taus = [p["tau_s"] for p in card["val_curve"]]
    assert taus == list(GRID[:len(taus)]) and len(card["rounds"]) == 1 and card["select_problems"] == 2
    assert set(ce["params"]) == {"q_level", "q_vel", "r", "p0"} and ce["params"]["p0"] == pytest.approx(ce["scale"])
    adapter = load_model(str(model_dir), device="cpu")
    pol = build_decoder("tspd", block_size=8, gen_length=16)
    Generation(adapter, arith.problems("test", 1)[0].prompt, pol).run()
    assert pol.tau_s == card["threshold"] and pol.kparams.p0 == pytest.approx(ce["scale"])
    again = main(["--model", str(model_dir), "--n-select", "2", "--reselect", "--budget", "1.0"])
    card2 = json.loads((model_dir / "tspd_controller.json").read_text())
    assert again["threshold"] == card2["threshold"] == min(GRID)      # any loss fits a budget of 100 %
    assert card2["reselected"]["budget"] == 1.0 and card2["rounds"] == card["rounds"] and len(card2["val_curve"]) == 13
