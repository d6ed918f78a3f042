"""Train the TSPD controller (14 -> 32 -> 32 -> 1 MLP) on trajectories of a conservative decoder.

    python -m engine.training.train_controller [--model tiny] [--n-train 600] [--n-val 200]
Label: the position's current candidate equals its final token. Data: the task's train split; the decision
threshold is the smallest score with precision >= 0.995 on trajectories from the val split. Writes
``tspd_controller.safetensors`` and ``tspd_controller.json`` (the card) next to the model.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from engine.training.collect import conservative_traces, controller_rows
from engine.ce.controller import MLP, MLPController
from engine.model import load_model
from engine.tasks import get_task


def precision_threshold(scores: np.ndarray, labels: np.ndarray, target: float) -> tuple[float, float, float]:
    """Smallest threshold t with precision(score >= t) >= target; returns (t, precision, recall)."""
    order = np.argsort(-scores, kind="stable")
    s, y = scores[order], labels[order]
    tp = np.cumsum(y)
    prec = tp / np.arange(1, len(y) + 1)
    cut = np.r_[s[1:] != s[:-1], True]           # a threshold keeps whole groups of tied scores
    ok = np.flatnonzero(cut & (prec >= target))
    if len(ok) == 0:
        return 1.0, float("nan"), 0.0
    k = ok[-1]
    return float(s[k]), float(prec[k]), float(tp[k] / max(1.0, y.sum()))


def train(rows_tr, epochs: int = 20, seed: int = 0, lr: float = 1e-3) -> MLP:
    torch.manual_seed(seed)
    mlp = MLP()
    x = torch.from_numpy(rows_tr.features)
    y = torch.from_numpy(rows_tr.label)
    n_pos = float(y.sum())
    pos_weight = torch.tensor((len(y) - n_pos) / max(1.0, n_pos))
    opt = torch.optim.AdamW(mlp.parameters(), lr=lr, weight_decay=1e-4)
    g = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        perm = torch.randperm(len(y), generator=g)
        for i in range(0, len(y), 4096):
            idx = perm[i:i + 4096]
            loss = torch.nn.functional.binary_cross_entropy_with_logits(mlp(x[idx]), y[idx], pos_weight=pos_weight)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return mlp.eval()


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--task", default="arith")
    ap.add_argument("--n-train", type=int, default=600)
    ap.add_argument("--n-val", type=int, default=200)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--precision", type=float, default=0.995)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    adapter = load_model(args.model)
    task = get_task(args.task)
    t0 = time.time()
    tr_rows = controller_rows(conservative_traces(adapter, task, "train", args.n_train))
    va_rows = controller_rows(conservative_traces(adapter, task, "val", args.n_val))
    mlp = train(tr_rows, args.epochs)
    ctrl = MLPController(mlp, 0.5, {})
    s_va = ctrl.score(va_rows.features)
    thr, prec, rec = precision_threshold(s_va, va_rows.label, args.precision)
    points = {str(p): dict(zip(("threshold", "precision", "recall"), precision_threshold(s_va, va_rows.label, p)))
              for p in (0.98, 0.99, 0.995)}
    card = dict(features=list(__import__("engine.ce.features", fromlist=["FEATURES"]).FEATURES),
                architecture="MLP 14-32-32-1 ReLU, sigmoid", label="candidate == final token",
                decoder="llada steps=B (one token per step), B in {8,16}", train_problems=args.n_train,
                val_problems=args.n_val, train_rows=int(len(tr_rows.label)), val_rows=int(len(va_rows.label)),
                train_positive_rate=float(tr_rows.label.mean()), epochs=args.epochs, target_precision=args.precision,
                val_precision=prec, val_recall=rec, operating_points=points, seconds=round(time.time() - t0, 1))
    ctrl = MLPController(mlp, thr, card)
    if not args.no_write:
        ctrl.save(adapter.path)
    print(json.dumps(dict(card, threshold=thr), indent=2))
    return dict(card, threshold=thr)


if __name__ == "__main__":
    main()
