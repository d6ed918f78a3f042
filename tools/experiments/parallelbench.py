"""Where parallel decoding must fail (ParallelBench, Kang et al., ICLR 2026): accuracy against tokens per forward,
per task and decoder, on the embedded model that knows the tasks, with the paper's closed form beside it.

    python -m tools.experiments parallelbench --model unmask-parallel-small --n 300 --batch 8

Every setting decodes the same held-out problems with the same seeds, at T = 1 (the marginals a parallel decoder
samples from are the model's own). The parallelism dial: LLaDA's fixed steps (k = B / steps tokens per forward),
the threshold rule's τ, and the adaptive decoders at their defaults (EB, KLASS, credit, Prophet, S2D2's verifier, and
TSPD with its heuristic controller: no CE controller is trained for this model). Each row is paired with AR on the same problems (exact McNemar).

The prediction for shuffle is computed from each decode's own trace: the answer's name slots committed in each
forward form groups; a model whose conditionals are exact (uniform over the names not yet placed) keeps a group of
m slots drawn from r names distinct with probability r! / ((r - m)! r^m) (``shuffle_success``); the prediction is
the mean over problems. For copy it is 1 whatever the grouping. Written to results/parallelbench_<model>.json, an
SVG figure beside it, and printed as Markdown.
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

from engine.harness.bench import run_bench
from engine.harness.progress import progress
from engine.tasks import get_task
from engine.tasks.parallelbench import shuffle_success
from tools.experiments.pareto import pareto_front
from tools import provenance

TASKS = ("copy", "reverse", "sort", "shuffle", "insert-index", "remove-index", "replace-index", "insert-random",
         "remove-random", "replace-random", "latin", "latin-strict", "sudoku", "sudoku-hard")
B = 8


def settings() -> list[str]:
    t = ",temperature=1"
    return (["ar:temperature=1"] + [f"llada:block_size={B},steps={s}{t}" for s in (4, 2, 1)]
            + [f"threshold:block_size={B},tau={tau}{t}" for tau in (0.9, 0.7, 0.5)]
            + [f"{d}:block_size={B}{t}" for d in ("eb", "klass", "credit", "prophet", "s2d2")]
            + [f"tspd:block_size={B},controller=heuristic{t}"])     # no CE controller is trained for this model


def name_groups(trace, n_names: int) -> list[int]:
    """How many of the answer's first ``n_names`` slots each forward committed, in order (forwards that committed
    none left out)."""
    lo = trace.meta.prompt_len
    groups = []
    for rec in trace.records:
        k = sum(1 for p, c in zip(rec.positions, rec.committed) if c and lo <= p < lo + n_names)
        if k:
            groups.append(k)
    return groups


def predicted(task: str, traces: list) -> float | None:
    """The closed form's mean over problems (shuffle), 1 (copy), None for the others."""
    if task == "copy":
        return 1.0
    if task != "shuffle":
        return None
    ps = [shuffle_success(name_groups(tr, len(prob.answer["line"])), len(prob.answer["line"]))
          for prob, tr in traces]
    return sum(ps) / len(ps)


def run_task(adapter, task: str, n: int, batch: int) -> list[dict]:
    from tools.experiments.__main__ import enrich
    probs = get_task(task).problems("test", n)
    kept = defaultdict(list)
    rows = run_bench(adapter, task, n, settings(), batch=batch, progress=progress(task),
                     on_trace=lambda spec, i, prob, tr: kept[spec].append((probs[i], tr)))
    rows = enrich(rows, 0)
    for r in rows:
        # S2D2's verifier accepts a draft span against its own one-at-a-time pass: those tokens are not independent
        # draws, so the closed form does not describe it
        verified = r["spec"].startswith("s2d2")
        r["task"], r["predicted"] = task, None if verified else predicted(task, kept[r["spec"]])
    return rows


COLS = [("spec", "setting", ""), ("acc_ci", "accuracy [95 % CI]", ""), ("predicted", "closed form", ".3f"),
        ("tpf", "tokens / forward", ".2f"), ("vs_base", "paired vs AR", "")]


def verdicts(res: dict) -> list[dict]:
    """Per adaptive decoder: its accuracy on shuffle against AR (paired) and its tokens per forward on copy against
    AR's: does it keep quality where the answer's tokens depend on each other and speed where they do not?"""
    out = []
    for spec in settings()[1:]:
        shuf = next(r for r in res["shuffle"] if r["spec"] == spec)
        copy = next(r for r in res["copy"] if r["spec"] == spec)
        out.append(dict(spec=spec, shuffle_acc=shuf["acc_ci"], shuffle_vs_ar=shuf.get("vs_base", ""),
                        copy_acc=copy["acc_ci"], copy_tpf=round(copy["tpf"], 2),
                        shuffle_tpf=round(shuf["tpf"], 2)))
    return out


def figure(res: dict) -> str:
    from tools.experiments.svg import scatter_svg
    series = {}
    for task in ("copy", "shuffle"):
        series[task] = [(r["tpf"], r["accuracy"], f"{task} {r['spec']}") for r in res[task]]
    series["shuffle, closed form"] = [(r["tpf"], r["predicted"], f"closed form {r['spec']}") for r in res["shuffle"]
                                      if r["predicted"] is not None]     # S2D2's verified commits: no closed form
    fronts = {t: [f"{t} {res[t][i]['spec']}" for i in pareto_front([(-r["tpf"], r["accuracy"]) for r in res[t]])]
              for t in ("copy", "shuffle")}
    return scatter_svg(series, fronts, x_label="tokens per forward (log)", y_label="accuracy",
                       title="copy keeps its accuracy as parallelism grows; shuffle cannot")


def main(args) -> None:
    from engine.models.model import load_model
    from tools.experiments.__main__ import md_table
    adapter = load_model(args.model)
    t0, res = time.time(), {}
    tasks = tuple(t for t in args.tasks.split(",") if t in TASKS) or TASKS      # the shared flag's default: all
    for task in tasks:
        res[task] = run_task(adapter, task, args.n, args.batch)
        r0 = res[task][0]
        print(f"\n### {task} (n = {r0['n']}, {r0['n_prompts']} distinct prompts, T = 1, B = {B})\n")
        print(md_table(res[task], COLS))
    summary = verdicts(res) if {"copy", "shuffle"} <= set(res) else []
    if summary:
        print("\n### quality on shuffle, speed on copy\n")
        print(md_table(summary, [("spec", "setting", ""), ("shuffle_acc", "shuffle accuracy", ""),
                                 ("shuffle_vs_ar", "paired vs AR", ""), ("shuffle_tpf", "shuffle TPF", ""),
                                 ("copy_acc", "copy accuracy", ""), ("copy_tpf", "copy TPF", "")]))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = dict(which="parallelbench", n=args.n, model=adapter.name, block_size=B, temperature=1.0,
                seconds=round(time.time() - t0, 1))
    path = out / f"parallelbench_{adapter.name}.json"
    provenance.write(path, dict(meta=meta, results=res, summary=summary))
    if summary:
        (out / f"parallelbench_{adapter.name}.svg").write_text(figure(res))
    print(f"\n({meta['seconds']} s; saved {path})")
