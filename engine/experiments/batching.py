"""Batched decoding against one problem at a time, in one run: the same rows (timing aside), and the speed.

    python -m engine.experiments batching --model unmask-tasks-small --task arith --n 200 --batches 1,8,32

Each batch size decodes the same problems with the same seeds; the rows of every size are checked equal to batch
1's (accuracy, outcomes, NFE, TPF, ...) and the table reports tokens/s and its ratio to batch 1. The sizes run one
after another in one process, after a warm-up.
"""

from __future__ import annotations

from engine.bench import run_bench

TIMING = ("wall_s", "tokens_per_s", "speedup")


def batching(adapter, task: str, n: int, spec: str, sizes=(1, 8, 32)) -> list[dict]:
    rows = []
    for size in sizes:
        (r,) = run_bench(adapter, task, n, [spec], batch=size, warmup=size == sizes[0])
        rows.append(dict(r, batch=size))
    untimed = [{k: v for k, v in r.items() if k not in TIMING + ("batch",)} for r in rows]
    for r, u in zip(rows, untimed):
        r.update(same_rows=u == untimed[0], vs_batch_1=r["tokens_per_s"] / rows[0]["tokens_per_s"])
    return rows


def report(rows: list[dict]) -> str:
    lines = ["| batch | accuracy | NFE/sample | tok/s | × batch 1 | rows equal batch 1's |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['batch']} | {r['accuracy']:.3f} | {r['nfe']:.2f} | {r['tokens_per_s']:.1f} | "
              f"{r['vs_batch_1']:.2f} | {'yes' if r['same_rows'] else 'NO'} |" for r in rows]
    return "\n".join(lines)


PAGE_SWEEP = ["ar", "threshold:tau=0.5,block_size=4", "threshold:tau=0.9,block_size=4",
              "threshold:tau=0.5,block_size=8", "threshold:tau=0.9,block_size=8", "threshold:tau=0.9,block_size=16"]


def page_sweep(adapter, task: str = "arith", n: int = 10, specs=PAGE_SWEEP, sizes=(1, 8)) -> list[dict]:
    """The Sweep tab's path (one bench per setting, as ``DecodeService.sweep_stream``) of len(specs) × n decodes,
    timed at each batch size in this process; the rows must agree but for timing."""
    import time
    out = []
    for size in sizes:
        t0, rows = time.perf_counter(), []
        for k, spec in enumerate(specs):
            rows += run_bench(adapter, task, n, [spec], batch=size, warmup=k == 0)
        out.append(dict(batch=size, decodes=len(specs) * n, seconds=time.perf_counter() - t0,
                        rows=[{k: v for k, v in r.items() if k not in TIMING} for r in rows]))
    for r in out:
        r.update(same_rows=r["rows"] == out[0]["rows"], vs_batch_1=out[0]["seconds"] / r["seconds"])
    return out


def main(args) -> None:
    import json
    from pathlib import Path
    from engine.model import load_model
    adapter = load_model(args.model)
    rows = batching(adapter, args.task, args.n, args.spec, tuple(int(b) for b in args.batches.split(",")))
    print(report(rows))
    sweep_rows = page_sweep(adapter, args.task, 10)
    for r in sweep_rows:
        print(f"Sweep tab path, {r['decodes']} decodes at batch {r['batch']}: {r['seconds']:.2f} s "
              f"(× {r['vs_batch_1']:.2f} faster than batch 1; rows equal: {r['same_rows']})")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    Path(args.out, "batching.json").write_text(json.dumps(dict(
        bench=rows, page_sweep=[{k: v for k, v in r.items() if k != "rows"} for r in sweep_rows]), indent=1, default=str))
