"""TSPD + CE against the threshold rule as whole fronts: accuracy against NFE per token, on the same problems.

    python -m engine.experiments.pareto --model tiny --n 100 --block-size 16

Sweeps the threshold rule's τ and TSPD's knobs (controller threshold τ_s, κ, h_max) plus the ablations (no CE, no
stabilisation, heuristic vs learned controller), all in one run; reports each point, each family's Pareto front,
and for every TSPD point how often the look-ahead committed a token and how often such a token was later
contradicted by the conservative reference decode (LLaDA one token per step) of the same problem. Writes
results/tspd_pareto.json and an HTML figure.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from engine.bench import run_bench
from engine.decoders import build_decoder
from engine.loop import Generation
from engine.model import load_model
from engine.tasks import get_task
from engine.trace import Reason

TAUS = (0.5, 0.7, 0.8, 0.9, 0.95, 0.99)


def specs(B: int) -> list[str]:
    out = [f"llada:block_size={B},steps={B}"] + [f"threshold:tau={t},block_size={B}" for t in TAUS]
    out += [f"tspd:block_size={B},tau_s={s}" for s in (0.2, 0.5, 0.8, 0.95)]
    out += [f"tspd:block_size={B},kappa={k}" for k in (0.0, 0.5, 1.0, 2.5)]
    out += [f"tspd:block_size={B},h_max={h}" for h in (0, 2, 8)]
    out += [f"tspd:block_size={B},ce=0", f"tspd:block_size={B},stabilise=0", f"tspd:block_size={B},controller=heuristic"]
    return out


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats on both axes (lower NFE per token, higher accuracy)."""
    return [i for i, (x, y) in enumerate(points)
            if not any((x2 <= x and y2 >= y) and (x2 < x or y2 > y) for x2, y2 in points)]


def lookahead_stats(adapter, task, n: int, spec: str, B: int) -> dict:
    """Share of commits made by the look-ahead, and how many of those the reference decode contradicts."""
    name, raw = spec.split(":", 1)
    params = dict(kv.split("=") for kv in raw.split(","))
    fired = contradicted = commits = 0
    for prob in task.problems("test", n):
        ref = Generation(adapter, prob.prompt, build_decoder("llada", block_size=B, steps=B)).run()
        tr = Generation(adapter, prob.prompt, build_decoder(name, **params)).run()
        final = ref.meta["final_tokens"]
        for r in tr.records:
            commits += r.n_committed
            for j in np.flatnonzero(r.reason == Reason.CE_LOOKAHEAD):
                fired += 1
                pos = int(r.positions[j])
                contradicted += pos < len(final) and int(r.tokens_after[j]) != final[pos]
    return dict(lookahead_share=fired / max(1, commits), lookahead_commits=fired,
                contradicted=contradicted / fired if fired else None)


def figure(rows: list[dict], path: Path) -> None:
    import plotly.graph_objects as go
    fig = go.Figure()
    for family in ("threshold", "tspd", "llada"):
        pts = [r for r in rows if r["decoder"] == family]
        fig.add_trace(go.Scatter(x=[r["nfe_per_token"] for r in pts], y=[r["accuracy"] for r in pts], mode="markers",
                                 name=family, text=[r["spec"] for r in pts]))
    fig.update_layout(xaxis_title="NFE per token", yaxis_title="accuracy", template="plotly_white")
    fig.write_html(path, include_plotlyjs="cdn")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--task", default="arith")
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--out", default="results")
    args = ap.parse_args(argv)
    adapter = load_model(args.model)
    rows = run_bench(adapter, args.task, args.n, specs(args.block_size))
    for r in rows:
        r["nfe_per_token"] = 1 / r["tpf"]
        if r["decoder"] == "tspd":
            r.update(lookahead_stats(adapter, get_task(args.task), min(args.n, 50), r["spec"], args.block_size))
    fronts = {}
    for family in ("threshold", "tspd"):
        idx = [i for i, r in enumerate(rows) if r["decoder"] == family]
        front = pareto_front([(rows[i]["nfe_per_token"], rows[i]["accuracy"]) for i in idx])
        fronts[family] = [rows[idx[k]]["spec"] for k in front]
    for r in rows:
        la = f" · look-ahead {r['lookahead_share']:.3f} of commits, contradicted {r['contradicted']}" \
            if "lookahead_share" in r else ""
        print(f"{r['spec']:48s} acc {r['accuracy']:.3f}  NFE/token {r['nfe_per_token']:.3f}{la}")
    print("fronts:", json.dumps(fronts, indent=1))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "tspd_pareto.json").write_text(json.dumps(dict(rows=rows, fronts=fronts), indent=1, default=str))
    figure(rows, out / "tspd_pareto.html")


if __name__ == "__main__":
    main()
