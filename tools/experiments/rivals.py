"""TSPD + CE against the trajectory-aware rivals (Prophet, KLASS, credit decoding) and the threshold rule.

    python -m tools.experiments rivals --model unmask-tasks-small --n 300 --blocks 8,16 --batch 8

Per task (arith greedy; story and picks at T = 1, where parallel commits can disagree) and block size, every
setting decodes the same problems with the same seeds. Each rival's row is compared (paired, exact McNemar) with
TSPD + CE's default; the summary names each decoder's front (accuracy against NFE per token), and at every B on
arithmetic the setting nearest TSPD's own target: within 1 point of AR at ≤ 0.85× the NFE per token of the
threshold rule at τ = 0.9. Written to results/rivals_<model>.json and printed as Markdown.
"""

from __future__ import annotations

import time
from pathlib import Path

from engine.harness.bench import run_bench
from tools.experiments.pareto import pareto_front
from engine.harness.progress import progress
from tools import provenance

TEMPERATURE = {"arith": 0.0, "story": 1.0, "picks": 1.0}
DIALS = {   # each decoder's settings: its dial over the range where it moves on this model
    "threshold": ["tau=0.7", "tau=0.9", "tau=0.99"],
    "tspd": ["", "controller=heuristic"],
    "prophet": ["gap_scale=1", "gap_scale=1.5", "gap_scale=2"],
    "klass": ["", "kl_history=1", "kl_history=1,tau=0.7"],
    "credit": ["tau=0.9", "tau=0.95"],
}
BASE = "tspd:block_size={B}"          # what every row is compared with
THRESHOLD = "threshold:block_size={B},tau=0.9"
TARGET = dict(points=0.01, nfe_ratio=0.85)


def specs(B: int, T: float) -> list[str]:
    tail = f",temperature={T:g}" if T else ""
    out = ["ar" + (f":temperature={T:g}" if T else "")]
    for name, dials in DIALS.items():
        out += [f"{name}:block_size={B}" + (f",{d}" if d else "") + tail for d in dials]
    return out


def fronts(rows: list[dict]) -> dict[str, list[str]]:
    """Per decoder, its settings on the joint Pareto front (lower NFE per token, higher accuracy)."""
    on = pareto_front([(r["nfe_per_token"], r["accuracy"]) for r in rows])
    return {name: [rows[i]["spec"] for i in on if rows[i]["spec"].split(":")[0] == name] for name in DIALS}


def nearest_target(rows: list[dict], B: int) -> dict:
    """TSPD's target on this table: the settings within 1 point of AR at ≤ 0.85× the threshold's NFE per token,
    and the setting closest to it (the smallest shortfall in points, then in NFE)."""
    ar = rows[0]["accuracy"]
    thr = next(r for r in rows if r["spec"] == THRESHOLD.format(B=B))["nfe_per_token"]
    def shortfall(r):
        return (max(0.0, ar - TARGET["points"] - r["accuracy"]), max(0.0, r["nfe_per_token"] / thr - TARGET["nfe_ratio"]))
    meets = [r["spec"] for r in rows[1:] if shortfall(r) == (0.0, 0.0)]
    best = min(rows[1:], key=shortfall)
    return dict(meets=meets, closest=best["spec"], closest_points_under_ar=round(ar - best["accuracy"], 4),
                closest_nfe_vs_threshold=round(best["nfe_per_token"] / thr, 3))


COLS = [("spec", "setting", ""), ("acc_ci", "accuracy [95 % CI]", ""), ("nfe_per_token", "NFE/token", ".3f"),
        ("tpf", "TPF", ".2f"), ("tokens_per_s", "tok/s", ".1f"), ("vs_base", "paired vs TSPD (row only – TSPD only)", "")]


def run(adapter, n: int, tasks, blocks, batch: int) -> dict:
    from tools.experiments.__main__ import enrich, md_table   # the tables' shared columns and paired tests
    out = {}
    for task in tasks:
        for B in blocks:
            sp = specs(B, TEMPERATURE[task])
            base = sp.index(BASE.format(B=B) + (f",temperature={TEMPERATURE[task]:g}" if TEMPERATURE[task] else ""))
            rows = enrich(run_bench(adapter, task, n, sp, progress=progress(f"{task} B{B}"), batch=batch), base)
            res = dict(rows=rows, fronts=fronts(rows))
            if task == "arith":
                res["target"] = nearest_target(rows, B)
            print(f"\n### {task}, B = {B}, T = {TEMPERATURE[task]:g}\n")
            print(f"n = {rows[0]['n']} problems ({rows[0]['n_prompts']} distinct prompts), a seed per problem; "
                  f"every row paired with `{sp[base]}`\n")
            print(md_table(rows, COLS))
            print(f"\nfronts: {res['fronts']}" + (f"\ntarget: {res['target']}" if "target" in res else ""))
            out[f"{task}_B{B}"] = res
    return out


def main(args) -> None:
    from engine.models.model import load_model
    adapter = load_model(args.model)
    t0 = time.time()
    blocks = tuple(int(b) for b in args.blocks.split(",")) if args.blocks else (8, 16)
    res = run(adapter, args.n, tuple(args.tasks.split(",")), blocks, args.batch)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    meta = dict(which="rivals", n=args.n, model=adapter.name, seconds=round(time.time() - t0, 1))
    path = Path(args.out, f"rivals_{adapter.name}.json")
    provenance.write(path, dict(meta=meta, results=res))
    print(f"\n({meta['seconds']} s; saved {path})")
