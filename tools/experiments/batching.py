"""Batched decoding against one problem at a time, in one run: the same rows (timing aside), and the speed.

    python -m tools.experiments batching --model unmask-tasks-small --task mix --n 200 --batches 1,8,32

Each batch size decodes the same problems with the same seeds; the rows of every size are checked equal to batch
1's (accuracy, outcomes, NFE, TPF, ...). The sizes run in turn, ``repeats`` times over (a shared machine drifts
by tens of percent within minutes), after a warm-up; the table reports the median tokens/s and, per repeat, its
ratio to that repeat's batch 1 (median, and the lowest and highest).
"""

from __future__ import annotations

import statistics

from engine.harness.bench import run_bench
from tools import provenance

TIMING = ("wall_s", "tokens_per_s", "speedup")


def batching(adapter, task: str, n: int, spec: str, sizes=(1, 8, 32), repeats: int = 3) -> list[dict]:
    runs = {size: [] for size in sizes}
    for rep in range(repeats):
        for size in sizes:
            (r,) = run_bench(adapter, task, n, [spec], batch=size, warmup=rep == 0 and size == sizes[0])
            runs[size].append(r)
    first = sizes[0]
    untimed = {size: [{k: v for k, v in r.items() if k not in TIMING} for r in rs] for size, rs in runs.items()}
    rows = []
    for size, rs in runs.items():
        ratios = [r["tokens_per_s"] / b["tokens_per_s"] for r, b in zip(rs, runs[first])]
        rows.append(dict(rs[0], batch=size, tokens_per_s=statistics.median(r["tokens_per_s"] for r in rs),
                         **vs_batch_1(ratios), repeats=repeats,
                         same_rows=all(u == untimed[first][0] for u in untimed[size])))
    return rows


def vs_batch_1(ratios: list[float]) -> dict:
    """Per-repeat speed ratios to batch 1 -> their median and (lowest, highest)."""
    return dict(vs_batch_1=statistics.median(ratios), vs_batch_1_range=(min(ratios), max(ratios)))


def report(rows: list[dict]) -> str:
    lines = ["| batch | accuracy [95 % CI] (n, distinct prompts) | NFE/sample | tok/s (median) | × batch 1 (median "
             "[lowest, highest]) | rows equal batch 1's |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['batch']} | {r['accuracy']:.3f} [{r['accuracy_ci95'][0]:.3f}, {r['accuracy_ci95'][1]:.3f}] "
              f"({r['n']}, {r['n_prompts']}) | {r['nfe']:.2f} | {r['tokens_per_s']:.1f} | "
              f"{r['vs_batch_1']:.2f} [{r['vs_batch_1_range'][0]:.2f}, {r['vs_batch_1_range'][1]:.2f}] | "
              f"{'yes' if r['same_rows'] else 'NO'} |" for r in rows]
    return "\n".join(lines)


PAGE_SWEEP = ["ar", "threshold:tau=0.5,block_size=4", "threshold:tau=0.9,block_size=4",
              "threshold:tau=0.5,block_size=8", "threshold:tau=0.9,block_size=8", "threshold:tau=0.9,block_size=16"]


def page_sweep(adapter, task: str = "arith", n: int = 10, specs=PAGE_SWEEP, sizes=(1, 8),
               repeats: int = 3) -> list[dict]:
    """The Sweep tab's path (``engine.harness.bench_stream``, as ``DecodeService.sweep_stream``) of len(specs) × n
    decodes, timed at each batch size in turn, ``repeats`` times over; the rows must agree but for timing."""
    import time
    from engine.harness.bench_stream import bench_stream
    runs = {size: [] for size in sizes}
    for rep in range(repeats):
        for size in sizes:
            t0 = time.perf_counter()
            *_, rows = bench_stream(adapter, task, n, list(specs), batch=size)
            untimed = [{k: v for k, v in r.items() if k not in TIMING} for r in rows]
            runs[size].append((time.perf_counter() - t0, untimed))
    first = runs[sizes[0]]
    out = []
    for size, rs in runs.items():
        ratios = [b[0] / r[0] for r, b in zip(rs, first)]
        out.append(dict(batch=size, decodes=len(specs) * n, seconds=statistics.median(r[0] for r in rs),
                        **vs_batch_1(ratios), same_rows=all(r[1] == first[0][1] for r in rs), rows=rs[0][1]))
    return out


def main(args) -> None:
    from pathlib import Path
    from engine.models.model import load_model
    adapter = load_model(args.model)
    rows = batching(adapter, args.task, args.n, args.spec, tuple(int(b) for b in args.batches.split(",")),
                    args.repeats)
    print(report(rows))
    sweep_rows = page_sweep(adapter, args.task, 10, repeats=args.repeats)
    for r in sweep_rows:
        lo, hi = r["vs_batch_1_range"]
        print(f"Sweep tab path, {r['decodes']} decodes at batch {r['batch']}: {r['seconds']:.2f} s (median of "
              f"{args.repeats}; × {r['vs_batch_1']:.2f} [{lo:.2f}, {hi:.2f}] faster than batch 1; rows equal: "
              f"{r['same_rows']})")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    sweeps = [{k: v for k, v in r.items() if k != "rows"} for r in sweep_rows]
    provenance.write(Path(args.out, "batching.json"), dict(bench=rows, page_sweep=sweeps))
