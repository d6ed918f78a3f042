"""Fit CE's Kalman noise (q_level, q_vel, R) by innovation log-likelihood on training-split trajectories.

    python -m engine.training.fit_ce [--model tiny] [--n 200]
Writes ``ce.json`` next to the model and prints the calibration: the fraction of realised z_{t+h} at or above
the forecast's lower bound ẑ − κσ_h, for h = 1..4 (target about 95 % at κ = 1.64).
"""

from __future__ import annotations

import argparse
import itertools
import json
import time

import numpy as np

from engine.training.collect import conservative_traces, z_series
from engine.ce.kalman import KalmanParams, run_filter
from engine.decoders.tspd import CE_FILE
from engine.model import load_model
from engine.tasks import get_task

GRID = dict(q_level=(0.01, 0.03, 0.1, 0.3, 0.5, 1.0, 2.0), q_vel=(0.001, 0.01, 0.03, 0.1, 0.2, 0.5),
            r=(0.02, 0.05, 0.1, 0.25, 0.5, 1.0))


def fit(Z: np.ndarray, F: np.ndarray, kappa: float = 1.64) -> dict:
    best = None
    for ql, qv, r in itertools.product(*GRID.values()):
        ll, _ = run_filter(Z, F, KalmanParams(ql, qv, r), horizons=())
        if best is None or ll > best[0]:
            best = (ll, KalmanParams(ql, qv, r))
    ll, params = best
    _, cover = run_filter(Z, F, params, kappa=kappa)
    return dict(params=params.as_dict(), loglik=ll, kappa=kappa, n_trajectories=int(Z.shape[0]),
                calibration={str(h): (hit / tot if tot else None) for h, (hit, tot) in cover.items()},
                calibration_counts={str(h): tot for h, (_, tot) in cover.items()})


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--task", default="arith")
    ap.add_argument("--n", type=int, default=200, help="training-split problems to decode")
    ap.add_argument("--kappa", type=float, default=1.64)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    adapter = load_model(args.model)
    t0 = time.time()
    traces = conservative_traces(adapter, get_task(args.task), "train", args.n)
    Z, F = z_series(traces)
    report = dict(fit(Z, F, args.kappa), decoder="llada steps=B, B in {8,16}", split="train", problems=args.n,
                  seconds=round(time.time() - t0, 1))
    if not args.no_write:
        (adapter.path / CE_FILE).write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
