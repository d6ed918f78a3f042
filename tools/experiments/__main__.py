"""The benchmark tables of the README, one command each. Every ratio is measured within one run of one process.

    python -m tools.experiments baselines --n 500          # AR, LLaDA, threshold
    python -m tools.experiments s2d2 --n 500               # S2D2 routers vs AR and a tuned threshold
    python -m tools.experiments tspd --n 200               # TSPD + CE vs LLaDA and threshold, cached / not
    python -m tools.experiments uncertain --model unmask-tasks-small --n 100    # the uncertain tasks
    python -m tools.experiments simsd --model unmask-tasks-small --n 100        # SimSD vs the target alone
    python -m tools.experiments drafter --model unmask-tasks-small --tasks arith,story --n 200   # the drafter pays?
    python -m tools.experiments tspd-pareto --n 500 --blocks 16                 # TSPD vs threshold fronts
    python -m tools.experiments revising --model unmask-tasks-small --tasks story,picks --n 200   # edit, wino, ...
    python -m tools.experiments sweep --settings FILE --task arith --n 200 [--batch 8] [--ray auto]  # any grid
    python -m tools.experiments batching --model unmask-tasks-small --n 200   # --batch 1 vs 8 vs 32
    python -m tools.experiments kv-cache --gens 64,256,512   # none / prefix / dual on a LLaDA-shaped model
    python -m tools.experiments rivals --model unmask-tasks-small --n 300   # TSPD vs Prophet, KLASS, credit
    python -m tools.experiments parallelbench --model unmask-parallel-small --n 300   # ParallelBench's tasks

Tuning (the threshold's τ for S2D2's comparison) uses the task's val split; reported figures use the test split.
Results are printed as Markdown and saved as JSON under --out.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from engine.harness import stats
from engine.harness.bench import run_bench
from engine.harness.progress import progress
from tools.experiments import pareto
from engine.models.model import load_model
from engine.runtime.lifecycle import stop_all

TAU_GRID = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95)


def md_table(rows: list[dict], cols: list[tuple[str, str, str]]) -> str:
    head = "| " + " | ".join(c[1] for c in cols) + " |"
    sep = "|" + "|".join("---" for _ in cols) + "|"
    body = ["| " + " | ".join(format(r.get(k, ""), f) if f and r.get(k) is not None else str(r.get(k, ""))
                              for k, _, f in cols) + " |" for r in rows]
    return "\n".join([head, sep, *body])


COLS = [("spec", "decoder", ""), ("acc_ci", "accuracy [95 % CI]", ""), ("nfe", "NFE/sample", ".2f"),
        ("nfe_paper", "NFE papers' count", ".2f"), ("nfe_per_token", "NFE/token", ".3f"), ("tpf", "TPF", ".2f"),
        ("tokens_per_s", "tok/s", ".1f"), ("speedup", "× first", ".2f"), ("vs_base", "paired vs base", "")]


def enrich(rows: list[dict], base: int | None = 0) -> list[dict]:
    """Derived columns: the accuracy with its Wilson interval, NFE per token, the verify rate, and each row's paired
    comparison (exact McNemar on the same problems and seeds) with row `base` (None: no comparison)."""
    for r in rows:
        kinds = r["nfe_by_kind"]
        r["acc_ci"] = stats.fmt_ci(r["accuracy"], r["accuracy_ci95"])
        r["nfe_per_token"] = 1 / r["tpf"] if r["tpf"] else None
        r["verify_rate"] = kinds.get("verify", 0) / kinds["draft"] if kinds.get("draft") else 0.0
        if base is not None and r is not rows[base]:
            b = rows[base]
            c = stats.compare(r["spec"], outcomes(r), b["spec"], outcomes(b))
            r["paired"] = c
            r["vs_base"] = (f"{c['a_only']}–{c['b_only']}, p = {c['p']:.2g}" +
                            ("" if c["significant"] else " (within noise)"))
    return rows


def outcomes(row: dict) -> list[bool]:
    return [ch == "1" for ch in row["outcomes"]]


def header(rows: list[dict], base: int = 0) -> str:
    """The line every table starts with: how many problems, how many distinct prompts, how seeds were drawn."""
    r = rows[0]
    return (f"n = {r['n']} problems ({r['n_prompts']} distinct prompts), each with its own seed; "
            f"paired comparisons (exact McNemar: this row only right – base only right) against "
            f"`{rows[base]['spec']}`")


def baselines(adapter, n: int) -> dict:
    specs = ["ar", "llada:block_size=8,steps=8", "threshold:tau=0.9,block_size=8",
             "threshold:tau=0.9,block_size=16", "threshold:tau=0.9,block_size=4"]
    rows = enrich(run_bench(adapter, "arith", n, specs, progress=progress("arith")))
    print(header(rows))
    print(md_table(rows, COLS))
    return dict(rows=rows)


def tune_tau(adapter, B: int, n_val: int) -> tuple[float, list[dict]]:
    """Best-TPF τ whose val accuracy is within 1 point of AR's (val split, never test)."""
    specs = ["ar"] + [f"threshold:tau={t},block_size={B}" for t in TAU_GRID]
    rows = run_bench(adapter, "arith", n_val, specs, split="val", progress=progress("arith"))
    ar_acc = rows[0]["accuracy"]
    ok = [r for r in rows[1:] if r["accuracy"] >= ar_acc - 0.01] or [rows[-1]]
    best = max(ok, key=lambda r: r["tpf"])
    return best["params"]["tau"], rows


def s2d2(adapter, n: int, n_val: int, blocks=(4, 8, 16)) -> dict:
    out = {}
    common = "estimator=entropy,beta=1.0,draft_ver=1,cache_ver=1"
    routers = {"always": "router=always", "never": "router=never", "span": "router=span,tau_span=2",
               "score": "router=score,score_type=static,cost=1,tau_score=0",
               "hysteresis": "router=hysteresis,tau_on=1,tau_off=-2", "ucb": "router=ucb,ucb_beta=1"}
    for B in blocks:
        tau, tuning = tune_tau(adapter, B, n_val)
        specs = ["ar", f"threshold:tau={tau},block_size={B},rule=sdar"]
        specs += [f"s2d2:block_size={B},tau={tau},{common},{r}" for r in routers.values()]
        rows = enrich(run_bench(adapter, "arith", n, specs, progress=progress("arith")), base=1)
        base_thr = rows[1]["tokens_per_s"]
        for r in rows:
            r["speedup_vs_threshold"] = r["tokens_per_s"] / base_thr
        print(f"\n### B = {B} (threshold τ tuned on val: {tau})\n")
        print(header(rows, 1))
        print(md_table(rows, COLS + [("verify_rate", "verify rate", ".2f"),
                                     ("speedup_vs_threshold", "× threshold", ".2f")]))
        out[str(B)] = dict(tau=tau, tuning=tuning, rows=rows)
    return out


def tspd(adapter, n: int, blocks=(8, 16, 32), gens=(64, 128), eos=(True, False), cache=(True, False)) -> dict:
    out = {}
    for G in gens:
        for B in blocks:
            for stop in eos:
                specs = []
                for use_cache in cache:
                    tail = f",gen_length={G},stop_at_eos={int(stop)},use_cache={int(use_cache)}"
                    specs += [f"llada:block_size={B},steps={B}{tail}", f"threshold:tau=0.9,block_size={B}{tail}",
                              f"tspd:controller=mlp,block_size={B}{tail}",
                              f"tspd:controller=heuristic,block_size={B}{tail}"]
                rows = enrich(run_bench(adapter, "arith", n, specs, progress=progress("arith")))
                print(f"\n### G = {G}, B = {B}, EOS stop {'on' if stop else 'off'}\n")
                print(header(rows))
                print(md_table(rows, COLS))
                out[f"G{G}_B{B}_eos{int(stop)}"] = rows
    return out


UNCERTAIN = ["ar", "llada:block_size=8,steps=8",
             "llada:block_size=8,steps=8,temperature=1", "llada:block_size=8,steps=4,temperature=1",
             "llada:block_size=8,steps=2,temperature=1", "threshold:rule=sdar,tau=0.9,steps=4,block_size=8,temperature=1",
             "s2d2:router=always,tau=0.9,steps=4,block_size=8,temperature=1",
             "threshold:tau=0.9,block_size=8,temperature=1", "tspd:controller=heuristic,block_size=8,temperature=1",
             "tspd:block_size=8,temperature=1", "simsd:block_size=8"]
UNCERTAIN_BASE = "threshold:tau=0.9,block_size=8,temperature=1"   # what every T = 1 row is compared with
TEACH = COLS + [("confident_share", "conf ≥ 0.9", ".2f"), ("reject_rate", "reject rate", ".3f")]


def uncertain(adapter, n: int, tasks=("arith", "story", "picks")) -> dict:
    """The tasks model on each task: greedy AR and one-per-step LLaDA, then at temperature 1 the parallel settings,
    S2D2 at the same τ and steps, the threshold rule, TSPD (heuristic and learned controller) and SimSD; with the
    teaching columns."""
    return per_task(adapter, n, tasks, UNCERTAIN, UNCERTAIN.index(UNCERTAIN_BASE), TEACH)


def per_task(adapter, n: int, tasks, specs: list[str], base: int, cols) -> dict:
    """The same settings on each task, every row paired with row `base`; a Markdown table per task."""
    out = {}
    for task in tasks:
        rows = enrich(run_bench(adapter, task, n, specs, progress=progress(task)), base=base)
        print(f"\n### {task}\n")
        print(header(rows, base))
        print(md_table(rows, cols))
        out[task] = rows
    return out


REVISING = ["threshold:tau=0.9,block_size=8,temperature=1", "s2d2:router=always,tau=0.9,steps=4,block_size=8,temperature=1",
            "tspd:block_size=8,temperature=1", "edit:block_size=8,temperature=1",
            "edit:block_size=8,temperature=1,check_next=false,post_steps=1", "edit:block_size=8,temperature=1,tau_edit=0.9",
            "edit:block_size=8,temperature=1,tau=0.7",
            "wino:block_size=8,temperature=1", "wino:block_size=8,temperature=1,tau_wide=0.8",
            "remdm:block_size=8,temperature=1", "eb:block_size=8,temperature=1",
            "eb:block_size=8,temperature=1,entropy_bound=0.5", "eb:block_size=8,temperature=1,entropy_bound=0.02",
            "threshold:tau=0.7,block_size=8,temperature=1", "threshold:tau=0.99,block_size=8,temperature=1"]
EDITS = [("edits_per_sample", "revisions / sample", ".2f"), ("turned_right", "wrong → right", ""),
         ("turned_wrong", "right → wrong", "")]


def revising(adapter, n: int, tasks=("story", "picks")) -> dict:
    """The decoders that change their mind (edit, wino, remdm) and EB beside threshold, S2D2 and TSPD at T = 1,
    each compared (paired) with the threshold rule at τ = 0.9; revisions per sample and what they did to the
    checker's verdict (the answer with every revised slot back to its first token, judged again)."""
    return per_task(adapter, n, tasks, REVISING, 0, COLS + EDITS)


def simsd(adapter, n: int, tasks=("arith", "story", "picks"), blocks=(4, 8)) -> dict:
    """SimSD against the target alone (threshold τ = 0.9 and one-per-step) for both masks and acceptance rules;
    NFE per token counts drafter forwards at the parameter ratio (target-equivalent)."""
    out = {}
    for task in tasks:
        for B in blocks:
            specs = [f"threshold:tau=0.9,block_size={B}", f"llada:block_size={B},steps={B}"]
            specs += [f"simsd:block_size={B},acceptance={a},mask={m}" + (",temperature=1" if a == "mrs" else "")
                      for a in ("greedy", "mrs") for m in ("released", "simplified")]
            rows = enrich(run_bench(adapter, task, n, specs, progress=progress(task)))   # SimSD rows: tpf per target-equivalent NFE
            print(f"\n### {task}, B = {B}\n")
            print(header(rows))
            print(md_table(rows, COLS + [("acceptance_rate", "acceptance", ".3f"),
                                         ("target_forwards", "target fwd", ".2f"), ("draft_forwards", "draft fwd", ".2f")]))
            out[f"{task}_B{B}"] = rows
    return out


def drafter(adapter, n: int, tasks=("arith", "story"), blocks=(4, 8)) -> dict:
    """The paired drafter against the target's static one-per-step decoding: SimSD with the static reveal rule
    (S = B drafter forwards a round) and the dynamic one (every draft above τ 0.9 at once); TPF counts drafter
    forwards at the drafter/target forward-time ratio measured in the same run."""
    out = {}
    for task in tasks:
        for B in blocks:
            specs = [f"llada:block_size={B},steps={B}", f"simsd:block_size={B}",
                     f"simsd:block_size={B},reveal=dynamic,tau=0.9"]
            rows = enrich(run_bench(adapter, task, n, specs, progress=progress(task)))
            for r in rows:
                r["vs_static"] = r["tpf"] / rows[0]["tpf"]
            print(f"\n### {task}, B = {B}\n")
            print(header(rows))
            print(md_table(rows, COLS + [("vs_static", "TPF × static", ".2f"),
                                         ("acceptance_rate", "acceptance", ".3f"),
                                         ("time_ratio", "drafter/target time", ".3f"),
                                         ("draft_forwards", "draft fwd", ".2f")]))
            out[f"{task}_B{B}"] = rows
    return out


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("which", choices=("baselines", "s2d2", "tspd", "uncertain", "simsd", "drafter", "tspd-pareto",
                                      "revising",
                                      *TOOLS))
    ap.add_argument("--tasks", default="arith,story,picks", help="uncertain/simsd: the tasks to run; tspd-pareto: "
                    "the first")
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--n-val", type=int, default=200)
    ap.add_argument("--blocks", default="", help="comma-separated block sizes (default: the issue's)")
    ap.add_argument("--gens", default="64,128", help="tspd, kv-cache: generation lengths")
    ap.add_argument("--no-uncached", action="store_true", help="tspd: skip the uncached runs")
    ap.add_argument("--eos", default="1,0", help="tspd: EOS early stop settings to run")
    ap.add_argument("--out", default="results")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (the README's tables: one per process)")
    ap.add_argument("--settings", help="sweep: a file of decoder SPECs, one per line")
    ap.add_argument("--task", default="arith", help="sweep, batching: the task")
    ap.add_argument("--batch", type=int, default=8, help="sweep: problems decoded at once per shard")
    ap.add_argument("--shard", type=int, default=50, help="sweep: problems per shard")
    ap.add_argument("--ray", default="", help="sweep: run the shards on Ray (auto, or a cluster's address)")
    ap.add_argument("--gpus-per-shard", type=float, default=0.0, help="sweep on Ray: GPUs each shard asks for")
    ap.add_argument("--hidden", type=int, default=768, help="kv-cache: the LLaDA-shaped model's width")
    ap.add_argument("--layers", type=int, default=12, help="kv-cache: its depth")
    ap.add_argument("--spec", default="threshold:tau=0.9,block_size=8", help="batching: the setting")
    ap.add_argument("--batches", default="1,8,32", help="batching: the batch sizes")
    ap.add_argument("--repeats", type=int, default=3, help="batching: runs of every size, in turn")
    return ap


# experiments that are their own module's main(args)
TOOLS = {"sweep": "tools.experiments.sweep", "batching": "tools.experiments.batching",
         "kv-cache": "tools.experiments.kvcache", "rivals": "tools.experiments.rivals",
         "parallelbench": "tools.experiments.parallelbench"}


def main(argv=None) -> None:
    try:
        run(parser().parse_args(argv))
    finally:        # the engine thread ended and the output written before the exit (engine.runtime.lifecycle); a
        stop_all()  # Ray worker's own exit (sys.exit in its task loop, or SIGTERM) runs the same at ``atexit``
        sys.stdout.flush()


def run(args) -> None:
    import torch
    torch.set_num_threads(args.threads)
    if args.which in TOOLS:
        import importlib
        importlib.import_module(TOOLS[args.which]).main(args)
        return
    adapter = load_model(args.model)
    t0 = time.time()
    blocks = tuple(int(b) for b in args.blocks.split(",")) if args.blocks else None
    if args.which == "tspd-pareto":   # writes its own JSON and SVG
        pareto.run(adapter, args.tasks.split(",")[0], args.n, (blocks or (16,))[0], Path(args.out))
        return
    if args.which == "baselines":
        res = baselines(adapter, args.n)
    elif args.which == "s2d2":
        res = s2d2(adapter, args.n, args.n_val, **({"blocks": blocks} if blocks else {}))
    elif args.which in ("uncertain", "simsd", "revising", "drafter"):
        res = dict(uncertain=uncertain, simsd=simsd, revising=revising, drafter=drafter)[args.which](
            adapter, args.n, tasks=tuple(args.tasks.split(",")), **({"blocks": blocks} if blocks and
                                                                      args.which == "drafter" else {}))
    else:
        res = tspd(adapter, args.n, **({"blocks": blocks} if blocks else {}),
                   gens=tuple(int(g) for g in args.gens.split(",")),
                   eos=tuple(bool(int(e)) for e in args.eos.split(",")),
                   cache=(True,) if args.no_uncached else (True, False))
    Path(args.out).mkdir(parents=True, exist_ok=True)
    meta = dict(which=args.which, n=args.n, model=adapter.name, revision=adapter.info.get("revision"),
                seconds=round(time.time() - t0, 1))
    name = args.which if args.which not in ("uncertain", "simsd", "revising", "drafter") else \
        f"{args.which}_{args.tasks.replace(',', '_')}"
    Path(args.out, f"{name}.json").write_text(json.dumps(dict(meta=meta, results=res), indent=1,
                                                               default=str))
    print(f"\n({meta['seconds']} s; saved {args.out}/{name}.json)")


if __name__ == "__main__":
    main()
