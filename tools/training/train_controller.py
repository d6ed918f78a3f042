"""[PROPOSED] Train TSPD + CE on the trajectories it will see. One seeded command; everything lands in the model
directory (``ce.json``, ``tspd_controller.safetensors``, and the card ``tspd_controller.json``).

    python -m tools.training.train_controller [--model tiny] [--task arith] [--n-train 400] [--n-val 300]

1. Reference: each train / val problem decoded conservatively (``--reference``: LLaDA one token per step by
   default, the diffusion decode TSPD must stay within a point of; or AR). A candidate is *positive* when it
   equals the reference's token at its position. Block sizes alternate 16, 8.
2. Round 0 data: the threshold rule's trajectories at τ ∈ TAUS (parallel decoding, as TSPD will see).
3. CE: the Kalman noise fitted and calibrated (``fit_ce``) on those trajectories.
4. DAgger: train the MLP on all rows so far, pick its operating threshold on val, decode the train problems with
   TSPD itself at that threshold and one grid step below, add those rows; ``--rounds`` times. Then the final MLP,
   CE refitted on every trajectory, and the operating threshold on ``--n-select`` val problems.
Operating threshold τ_s: walking down the grid, the last value at which TSPD (its full default configuration)
loses at most ``--budget`` of the val answers, net, against the reference decode (the task's checker decides):
a per-answer error budget, not a per-token precision. Not "answers changed": on the embedded arithmetic model
the decode order alone changes 4 % of 150 val answers between AR and LLaDA one-per-step, and the threshold rule
at τ = 0.999 changes 4 % against AR too, so a 1 % budget on changed answers admits no parallel decoder at all.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from engine.decoders.tspd.controller import MLP, MLPController
from engine.decoders.tspd.features import FEATURES
from engine.decoders.tspd.kalman import KalmanParams
from engine.decoders import build_decoder
from engine.decoders.tspd.policy import CE_FILE
from engine.models.model import load_model
from engine.tasks import get_task
from tools.training.collect import Rows, controller_rows, lookahead_counts, reference_split, rollouts, z_series
from tools.training.fit_ce import coverage, fit
from engine.records.trace import Reason

TAUS = (0.5, 0.7, 0.9, 0.99)
GRID = (0.999, 0.998, 0.995, 0.99, 0.98, 0.97, 0.95, 0.9, 0.85, 0.8, 0.7, 0.6, 0.5)


def train(rows, epochs: int = 20, seed: int = 0, lr: float = 1e-3) -> MLP:
    """Plain binary cross-entropy, so the score reads as P(candidate is final | trajectory)."""
    torch.manual_seed(seed)
    mlp = MLP()
    x, y = torch.from_numpy(rows.features), torch.from_numpy(rows.label)
    opt = torch.optim.AdamW(mlp.parameters(), lr=lr, weight_decay=1e-4)
    g = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        perm = torch.randperm(len(y), generator=g)
        for i in range(0, len(y), 4096):
            idx = perm[i:i + 4096]
            loss = torch.nn.functional.binary_cross_entropy_with_logits(mlp(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return mlp.eval()


def tspd_policy(ctrl: MLPController, kparams: KalmanParams, tau_s: float):
    def make(B: int):
        pol = build_decoder("tspd", block_size=B, tau_s=tau_s)
        pol.given_controller, pol.given_kparams = ctrl, kparams
        return pol
    return make


def answer_point(task, split, traces, tau_s: float) -> dict:
    """How TSPD at τ_s did on a split: answers changed vs the reference; *broken* (the reference's answer passes
    the task's checker, TSPD's does not: on an uncertain task another valid answer is no loss); *lost*, the net
    share of answers lost (reference accuracy − TSPD's) at the worst block size, since a mix of block sizes would
    let a safe B = 8 hide a loss at B = 16; accuracy, NFE per token, look-ahead share."""
    changed = [t.meta.text != r.meta.text for t, r in zip(traces, split.refs)]
    correct = np.array([task.verdict(t.meta.text, p) == "valid" for t, p in zip(traces, split.problems)])
    ref_ok = np.array([task.verdict(r.meta.text, p) == "valid" for r, p in zip(split.refs, split.problems)])
    blocks = np.array(split.blocks)
    lost_by_block = {int(B): float(ref_ok[blocks == B].mean() - correct[blocks == B].mean()) for B in set(split.blocks)}
    tokens = sum(t.meta.generated_tokens for t in traces)
    commits = sum(r.n_committed for t in traces for r in t.records)
    fired = sum(int((r.reason == Reason.CE_LOOKAHEAD).sum()) for t in traces for r in t.records)
    return dict(tau_s=tau_s, changed=float(np.mean(changed)), broken=float(np.mean(ref_ok & ~correct)),
                lost=max(lost_by_block.values()), lost_by_block=lost_by_block,
                accuracy=float(np.mean(correct)), reference_accuracy=float(np.mean(ref_ok)),
                nfe_per_token=sum(t.nfe for t in traces) / max(1, tokens), lookahead_share=fired / max(1, commits))


def operating_threshold(curve: list[dict], budget: float) -> float:
    """Walk the curve from the highest τ_s down; the last point before the first one that loses more than
    ``budget`` of the answers (net, against the reference decode)."""
    chosen = None
    for pt in sorted(curve, key=lambda p: -p["tau_s"]):
        if pt["lost"] > budget:
            break
        chosen = pt["tau_s"]
    return chosen if chosen is not None else max(p["tau_s"] for p in curve)


def answer_curve(adapter, task, split, ctrl, kparams, budget: float) -> tuple[list[dict], dict]:
    """Decode the split at each grid τ_s, from the top, down to the first point over budget. Also returns the
    traces of the last two points, {τ_s: traces}: the operating point is one of them."""
    curve, kept = [], {}
    for tau_s in GRID:
        traces = rollouts(adapter, split, tspd_policy(ctrl, kparams, tau_s))
        curve.append(answer_point(task, split, traces, tau_s))
        kept = {t: kept[t] for t in list(kept)[-1:]} | {tau_s: traces}
        if curve[-1]["lost"] > budget:
            break
    return curve, kept


def fit_ce(traces) -> tuple[KalmanParams, dict]:
    Z, F = z_series(traces)
    report = fit(Z, F)
    return KalmanParams(**report["params"]), report


def lookahead_check(split, traces, kparams) -> dict:
    """At the operating point (TSPD's ``traces`` of the split), on val: CE's coverage on TSPD's own trajectories,
    and how many look-ahead commits the reference decode contradicts."""
    Z, F = z_series(traces)
    pooled, per_h = coverage(Z, F, kparams, 1.64)
    counts = [lookahead_counts(tr, ref.meta.final_tokens) for tr, ref in zip(traces, split.refs)]
    fired, wrong = sum(c[1] for c in counts), sum(c[2] for c in counts)
    return dict(val_coverage=pooled, val_coverage_by_h=per_h, lookahead_commits=fired,
                lookahead_contradicted=wrong / fired if fired else None)


def dagger(adapter, task, tr_split, va_split, args, log) -> dict:
    """Rounds of: train on all rows, pick τ_s on val, add TSPD's own trajectories at τ_s and one step below."""
    traces, parts = [], []      # every decode (for CE), and its rows (replayed once, when it is added)

    def add(make_policy):
        new = rollouts(adapter, tr_split, make_policy)
        traces.extend(new)
        parts.append(controller_rows(new, tr_split.refs))
        return Rows.concat(parts)

    for tau in TAUS:
        rows = add(lambda B, t=tau: build_decoder("threshold", tau=t, block_size=B))
    kparams, _ = fit_ce(traces)
    rounds = []
    for k in range(args.rounds):
        ctrl = MLPController(train(rows, args.epochs, args.seed), 0.5, {})
        curve, _ = answer_curve(adapter, task, va_split, ctrl, kparams, args.budget)
        tau_s = operating_threshold(curve, args.budget)
        lower = GRID[min(GRID.index(tau_s) + 1, len(GRID) - 1)]
        for t in dict.fromkeys((tau_s, lower)):
            rows = add(tspd_policy(ctrl, kparams, t))
        rounds.append(dict(round=k, tau_s=tau_s, explored=[tau_s, lower], rows=int(len(rows.label)), curve=curve))
        log(f"round {k}: τ_s {tau_s}, {len(rows.label)} rows")
    kparams, ce = fit_ce(traces)
    ctrl = MLPController(train(rows, args.epochs, args.seed), 0.5, {})
    return dict(ctrl=ctrl, kparams=kparams, ce=ce, rounds=rounds, rows=rows, decodes=len(traces))


def select(adapter, task, ctrl, kparams, args, reference: str) -> tuple[float, list, dict]:
    """The operating threshold on ``--n-select`` val problems (more than the rounds use: a 1 % budget needs them),
    the curve down to the first point over budget, and the look-ahead check there."""
    split = reference_split(adapter, task, "val", args.n_select, seed=args.seed, reference=reference)
    curve, kept = answer_curve(adapter, task, split, ctrl, kparams, args.budget)
    tau_s = operating_threshold(curve, args.budget)
    return tau_s, curve, lookahead_check(split, kept[tau_s], kparams)


def reselect(adapter, task, args) -> dict:
    """Only the operating threshold, again, for the controller and CE already in the model directory (a new
    budget, rule or selection split without retraining); the card records that it was reselected."""
    t0 = time.time()
    ctrl = MLPController.load(adapter.path)
    ce = json.loads((adapter.path / CE_FILE).read_text())
    kparams = KalmanParams(**ce["params"])
    tau_s, curve, check = select(adapter, task, ctrl, kparams, args, ctrl.card["reference"])
    card = dict(ctrl.card, budget=args.budget, val_curve=curve, select_problems=args.n_select, **check,
                reselected=dict(budget=args.budget, select_problems=args.n_select, seconds=round(time.time() - t0, 1)))
    if not args.no_write:
        MLPController(ctrl.mlp, tau_s, card).save(adapter.path)
        (adapter.path / CE_FILE).write_text(json.dumps(dict(ce, **check), indent=2))
    print(json.dumps(dict(card, threshold=tau_s), indent=2))
    return dict(card, threshold=tau_s)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--task", default="arith")
    ap.add_argument("--n-train", type=int, default=400)
    ap.add_argument("--n-val", type=int, default=300, help="val problems for the DAgger rounds' thresholds")
    ap.add_argument("--n-select", type=int, default=1000, help="val problems for the final operating threshold")
    ap.add_argument("--rounds", type=int, default=2, help="DAgger rounds of on-policy TSPD data")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--budget", type=float, default=0.01, help="net share of val answers TSPD may lose")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reference", choices=("ar", "llada"), default="llada",
                    help="the conservative decode whose tokens are the labels and whose answers the budget counts")
    ap.add_argument("--reselect", action="store_true", help="keep the trained controller and CE; choose τ_s again")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    adapter, task, t0 = load_model(args.model), get_task(args.task), time.time()
    if args.reselect:
        return reselect(adapter, task, args)
    log = lambda msg: print(f"[{time.time() - t0:6.0f}s] {msg}", flush=True)  # noqa: E731
    tr_split = reference_split(adapter, task, "train", args.n_train, seed=args.seed, reference=args.reference)
    va_split = reference_split(adapter, task, "val", args.n_val, seed=args.seed, reference=args.reference)
    log("reference decodes done")
    out = dagger(adapter, task, tr_split, va_split, args, log)
    ctrl = out["ctrl"]
    tau_s, curve, check = select(adapter, task, ctrl, out["kparams"], args, args.reference)
    card = dict(features=list(FEATURES), architecture="MLP 14-32-32-1 ReLU, sigmoid, plain BCE",
                label=f"candidate == the reference decode's token ({args.reference})", reference=args.reference,
                data="on-policy: threshold τ ∈ %s, then TSPD itself (DAgger, %d rounds), B ∈ {16, 8}"
                     % (list(TAUS), args.rounds),
                task=args.task, train_problems=args.n_train, val_problems=args.n_val, decodes=out["decodes"],
                train_rows=int(len(out["rows"].label)), train_positive_rate=float(out["rows"].label.mean()),
                epochs=args.epochs, seed=args.seed, budget=args.budget, rounds=out["rounds"], val_curve=curve,
                select_problems=args.n_select,
                **check, seconds=round(time.time() - t0, 1))
    ce = dict(out["ce"], data="train-split trajectories of every decode above", **check)
    if not args.no_write:
        MLPController(ctrl.mlp, tau_s, card).save(adapter.path)
        (adapter.path / CE_FILE).write_text(json.dumps(ce, indent=2))
    print(json.dumps(dict(card, threshold=tau_s, ce=ce), indent=2))
    return dict(card, threshold=tau_s, ce=ce)


if __name__ == "__main__":
    main()
