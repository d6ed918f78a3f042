"""TSPD + CE: the Kalman forecast, the commit rules on hand-built trajectories, controller and fitting scripts."""

import numpy as np
import pytest
import torch

from engine.decoders.tspd.controller import MLP, MLPController
from engine.decoders.tspd.kalman import KalmanParams, TrendFilter
from engine.decoders import build_decoder
from engine.runtime.loop import Generation
from engine.records.trace import Reason
from tests.conftest import ScriptedAdapter


def test_forecast_variance_matches_monte_carlo():
    p = KalmanParams(q_level=0.05, q_vel=0.02, r=0.25)
    kf = TrendFilter(1, p)
    kf.s[:] = [[0.5, 0.3]]
    kf.P[:] = np.array([[0.4, 0.1], [0.1, 0.2]])
    rng = np.random.default_rng(0)
    n = 200000
    s = rng.multivariate_normal(kf.s[0], kf.P[0], size=n)
    for h in range(1, 6):
        s = np.stack([s[:, 0] + s[:, 1] + rng.normal(0, np.sqrt(p.q_level), n),
                      s[:, 1] + rng.normal(0, np.sqrt(p.q_vel), n)], 1)
        mean, std = kf.forecast(h)
        assert s[:, 0].mean() == pytest.approx(mean[0], abs=0.02)
        assert s[:, 0].std() == pytest.approx(std[0], rel=0.02)


def test_velocity_converges_to_slope_and_flip_inflates():
    rng = np.random.default_rng(1)
    kf = TrendFilter(1, KalmanParams(0.01, 0.001, 0.25))
    for t in range(60):
        kf.step(np.array([-3 + 0.15 * t + rng.normal(0, 0.5)]), np.ones(1, bool), np.zeros(1, bool))
    assert kf.s[0, 1] == pytest.approx(0.15, abs=0.05)
    before = kf.P[0].copy()
    kf.step(np.array([6.0]), np.ones(1, bool), np.ones(1, bool))
    assert kf.P[0, 0, 0] > before[0, 0] and kf.P[0, 1, 1] > before[1, 1]
    assert abs(kf.s[0, 1]) < 0.5  # velocity was reset, not carried


def script(t):
    rising = (40, float(1 / (1 + np.exp(-(-1.6 + 1.2 * t)))))       # z = -1.6, -0.4, 0.8, 2.0 (c = .88), ...
    oscill = (30 + t % 2, 0.80)                                      # flips every step
    return [rising, oscill] + [(20 + k, 0.89) for k in range(6)]      # stable fillers, forced one per step


def test_lookahead_commits_rising_not_oscillating():
    kalman = dict(q_level=0.05, q_vel=0.05, r=0.1)
    pol = build_decoder("tspd", controller="heuristic", tau=0.9, alpha=0.0, block_size=8, gen_length=8, use_cache=False,
                        stop_at_eos=False, stabilise=True, **kalman)
    tr = Generation(ScriptedAdapter(script), [1, 10, 11, 12, 13, 14, 15, 16], pol).run()
    reason = {int(r.positions[j]) - 8: (s, int(r.reason[j])) for s, r in enumerate(tr.records)
              for j in np.flatnonzero(r.committed)}
    step, why = reason[0]
    assert why == Reason.CE_LOOKAHEAD and step == 3
    assert tr.records[step].confidence[0] < 0.9                      # committed before reaching tau
    assert reason[1][0] > step and reason[1][1] not in (Reason.TSPD, Reason.CE_LOOKAHEAD, Reason.STABILISED)
    assert tr.records[3].extra["klass"][1] == 2                      # oscillatory
    nolook = build_decoder("tspd", controller="heuristic", tau=0.9, alpha=0.0, block_size=8, gen_length=8,
                           use_cache=False, stop_at_eos=False, ce=False, **kalman)
    tr2 = Generation(ScriptedAdapter(script), [1, 10, 11, 12, 13, 14, 15, 16], nolook).run()
    assert all(int(c) != Reason.CE_LOOKAHEAD for r in tr2.records for c in r.reason)


def test_controller_deterministic_and_roundtrip(tmp_path):
    torch.manual_seed(0)
    ctrl = MLPController(MLP(), 0.7, {"note": "test"})
    x = np.random.default_rng(0).random((50, 14)).astype(np.float32)
    a, b = ctrl.score(x), ctrl.score(x)
    assert np.array_equal(a, b)
    ctrl.save(tmp_path)
    back = MLPController.load(tmp_path)
    assert back.threshold == 0.7 and np.array_equal(back.score(x), a)


def test_tspd_on_model_and_scripts_on_small_trace_set(adapter, arith, tmp_path):
    from tools.training.collect import controller_rows, reference_split, z_series
    from tools.training.fit_ce import fit
    from tools.training.train_controller import train

    traces = reference_split(adapter, arith, "train", 6, gen_length=16).refs
    rows = controller_rows(traces)
    assert rows.features.shape[1] == 14 and len(rows.label) == len(rows.prompt) > 0
    mlp = train(rows, epochs=2)
    assert np.isfinite(MLPController(mlp, 0.5, {}).score(rows.features)).all()
    Z, F = z_series(traces)
    rep = fit(Z, F)
    assert set(rep["params"]) == {"q_level", "q_vel", "r", "p0"} and rep["n_trajectories"] == Z.shape[0]
    assert all(0 <= v <= 1 for v in rep["calibration"].values() if v is not None)
    tr = Generation(adapter, arith.problems("test", 1)[0].prompt,
                    build_decoder("tspd", controller="heuristic", block_size=8, gen_length=16)).run()
    for r in tr.records:
        L = len(r.positions)
        assert r.extra["forecast_lcb"].shape == (L, 4) and r.extra["features"].shape == (L, 14)
        masked = r.tokens_before == adapter.mask_token_id
        assert np.isnan(r.extra["level"][~masked]).all() and not np.isnan(r.extra["level"][masked]).any()
    assert sum(tr.meta.nfe_by_kind.values()) == tr.nfe
