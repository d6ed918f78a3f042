"""The compiled forward (``UNMASK_COMPILE``, engine/models/compiled.py) against eager, in one process.

    python -m tools.experiments.compiled exact                 # golden decodes compiled: tokens, records vs eager
    python -m tools.experiments.compiled bench --batch 8 --n 48 --repeats 3     # tokens/s, compiled / eager
    python -m tools.experiments.compiled bench --dynamic ...   # the same, compiled with dynamic shapes
    python -m tools.experiments.compiled forward               # per forward: static shapes against dynamic
    python -m tools.experiments.compiled ragged --batch 8      # today's path, its MLPs and norms compiled
    python -m tools.experiments.compiled class --n 12 --repeats 5   # twelve visitors' decodes in one process

``exact``: every golden decode (tests/golden.py) of the fp32 models on the CPU, decoded eagerly on today's path,
then once more with compilation on (which queues each bucket's compile; that decode runs eagerly), then, every
compile done, a third time through the compiled forward (each forward says so): its tokens and NFE against the
eager decode's and the golden file's, its records' confidences against the eager decode's (largest difference).
``bench``: ``run_bench`` over the same problems in three modes, alternating ``repeats`` times: today's eager path
(``UNMASK_STATIC=off``), the static path eager (``UNMASK_STATIC=on``) and compiled (after warm-up passes until no
bucket is left to compile); median tokens/s and the per-repeat ratio to eager (median, lowest, highest). Both
print each bucket's first-compile time. JSON on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

import numpy as np
import torch

from tools.bench.clock import median_ms, seconds, spread
from tools.bench.report import progress

MODES = {"eager": dict(UNMASK_STATIC="off", UNMASK_COMPILE="off"),
         "static": dict(UNMASK_STATIC="on", UNMASK_COMPILE="off"),
         "compiled": dict(UNMASK_STATIC="on", UNMASK_COMPILE="on")}


def mode(name: str) -> None:
    """Switch the forward path for the rest of the process (each run below sets its own before it starts)."""
    os.environ.update(MODES[name])


def compile_seconds(adapter) -> dict:
    comp = adapter.__dict__.get("_compiled")
    return {} if comp is None else {str(k[:2]) + ("" if len(k) == 2 else " slots"): round(s, 1)
                                     for k, s in comp.seconds.items()}


def settle(adapter, run) -> int:
    """Run until a pass queues no new compile, waiting for each pass's compiles; the passes it took (at most 4)."""
    from engine.models.compiled import Compiled
    comp = Compiled.of(adapter)
    for passes in range(1, 5):
        before = len(comp.queued)
        run()
        comp.wait()
        if len(comp.queued) == before:
            break
    return passes


def exact(only: tuple[str, ...] = ()) -> dict:
    from engine.decoders import build_decoder, parse_spec
    from engine.models.model import load_model
    from engine.runtime.loop import Generation
    from engine.tasks import get_task
    from tests.golden import GOLDEN, OTHER_SPECS, SPECS, dream_model, key, summarise
    from engine.models import compiled
    compiled.MAX_SHAPES = 64          # every bucket the golden decodes meet, so that every forward is compiled
    want = json.loads(GOLDEN.read_text())
    prompts = [p.prompt for p in get_task("arith").problems("test", 3, seed=7)]
    stories = [p.prompt for p in get_task("story").problems("test", 2, seed=7)]
    models, rows = {}, []
    for model, spec in [("tiny", s) for s in SPECS] + [o for o in OTHER_SPECS if o[0] != "unmask-uniform-small"]:
        if only and spec.split(":")[0] not in only:
            continue
        if model not in models:
            models[model] = dream_model() if model == "dream" else load_model(model, device="cpu")
        adapter, name_params = models[model], parse_spec(spec)
        for i, p in enumerate(stories if model == "unmask-tasks-small" else prompts):
            def one(p=p):
                return Generation(adapter, p, build_decoder(name_params[0], **name_params[1])).run()
            mode("eager")
            base = one()
            mode("compiled")
            settle(adapter, one)
            got = one()
            diff = max([float(np.max(np.abs(np.nan_to_num(a.confidence, nan=-1) - np.nan_to_num(b.confidence,
                                                                                                 nan=-1)), initial=0.0))
                        for a, b in zip(base.records, got.records)] or [0.0])
            w, g = want[key(model, spec)][i], summarise(got)
            rows.append(dict(spec=key(model, spec), prompt=i, paths=got.meta.forward_path,
                             same_tokens=base.meta.token_ids == got.meta.token_ids and base.nfe == got.nfe,
                             golden_tokens=g["token_ids"] == w["token_ids"] and g["nfe"] == w["nfe"],
                             records=len(base.records) == len(got.records), max_conf_diff=diff))
            progress("exact", rows[-1])
    compiled_all = all(set(r["paths"]) == {"compiled"} for r in rows)
    return dict(decodes=len(rows), all_forwards_compiled=compiled_all,
                same_tokens=all(r["same_tokens"] and r["records"] for r in rows),
                golden_tokens=all(r["golden_tokens"] for r in rows),
                max_conf_diff=max((r["max_conf_diff"] for r in rows), default=0.0),
                not_compiled=[r["spec"] for r in rows if set(r["paths"]) != {"compiled"}],
                compile_s={m: compile_seconds(a) for m, a in models.items()})


def bench(model: str, task: str, n: int, spec: str, batch: int, repeats: int) -> dict:
    from engine.harness.bench import run_bench
    from engine.models.model import load_model
    from engine.runtime.jobs import configure
    configure(max_running=batch)
    adapter = load_model(model, device="cpu")
    mode("compiled")
    warm_s, passes = seconds(lambda: settle(adapter, lambda: run_bench(adapter, task, n, [spec], batch=batch,
                                                                        warmup=False)))
    progress("warm", dict(warm_passes=passes, warm_s=warm_s, compile_s=compile_seconds(adapter)))
    runs: dict = {m: [] for m in MODES}
    for _ in range(repeats):
        for m in MODES:
            mode(m)
            (r,) = run_bench(adapter, task, n, [spec], batch=batch, warmup=True)
            runs[m].append(r)
            progress("run", dict(mode=m, tokens_per_s=r["tokens_per_s"], outcomes=r["outcomes"], nfe=r["nfe"]))
    ratios = {m: [r["tokens_per_s"] / e["tokens_per_s"] for r, e in zip(rs, runs["eager"])] for m, rs in runs.items()}
    same = all(r["outcomes"] == runs["eager"][0]["outcomes"] and r["nfe"] == runs["eager"][0]["nfe"]
               for rs in runs.values() for r in rs)
    return dict(model=model, task=task, n=n, spec=spec, batch=batch, repeats=repeats, same_rows=same,
                warm_passes=passes, warm_s=round(warm_s, 1), compile_s=compile_seconds(adapter),
                tokens_per_s={m: round(statistics.median(r["tokens_per_s"] for r in rs), 1) for m, rs in runs.items()},
                vs_eager={m: spread(x) for m, x in ratios.items()})


def forward_rows(model: str, shapes, reps: int) -> dict:
    """Per forward (no cache, full attention) at each (batch, rows): eager, compiled per shape (static shapes, one
    compile each) and compiled once with dynamic shapes; median ms, first-compile seconds, largest logit
    difference to eager and whether every argmax agrees."""
    from engine.models.model import load_model
    adapter = load_model(model, device="cpu")
    m = adapter.model
    fns = {"static": torch.compile(m, dynamic=False), "dynamic": torch.compile(m, dynamic=True)}
    rows = []
    for B, Q in shapes:
        kw = dict(input_ids=torch.randint(0, adapter.vocab_size, (B, Q)), position_ids=torch.arange(Q).expand(B, Q),
                  attention_mask=torch.ones(B, 1, Q, Q, dtype=torch.bool), use_cache=False)
        row = dict(batch=B, rows=Q)
        with torch.no_grad():
            ref = m(**kw).logits
            row["eager_ms"] = median_ms(lambda: m(**kw), reps)
            for name, fn in fns.items():
                took, out = seconds(lambda: fn(**kw).logits)
                row[f"{name}_compile_s"] = round(took, 1)
                row[f"{name}_ms"] = median_ms(lambda: fn(**kw), reps)
                row[f"{name}_max_diff"] = float((out - ref).abs().max())
                row[f"{name}_argmax_equal"] = bool((out.argmax(-1) == ref.argmax(-1)).all())
        progress("forward", row)
        rows.append(row)
    return dict(model=model, rows=rows)


def class_rows(model: str, n: int, spec: str, repeats: int) -> dict:
    """A class in one process: bench_visitors' n prompts decoded as one engine-loop run (up to 16 a round), today's
    eager path and compiled alternating (after warm-up passes); each run's seconds, and the tokens against eager."""
    from engine.decoders import build_decoder, parse_spec
    from engine.models.model import load_model
    from engine.runtime.jobs import run_batched
    from engine.runtime.loop import Generation
    from tools.page.bench_visitors import prompts
    adapter, (name, params) = load_model(model, device="cpu"), parse_spec(spec)
    jobs = [(lambda p=p: Generation(adapter, p, build_decoder(name, **params)).requests()) for p in prompts(n)]
    mode("compiled")
    settle(adapter, lambda: run_batched(jobs, 16))
    secs: dict = {"eager": [], "compiled": []}
    ids: dict = {}
    for _ in range(repeats):
        for m in secs:
            mode(m)
            took, traces = seconds(lambda: run_batched(jobs, 16))
            ids[m] = [tr.meta.token_ids for tr in traces]
            secs[m].append(took)
    x = [c / e for c, e in zip(secs["compiled"], secs["eager"])]
    return dict(model=model, n=n, spec=spec, same_tokens=ids["eager"] == ids["compiled"],
                seconds={k: [round(v, 3) for v in vs] for k, vs in secs.items()},
                compiled_over_eager=spread(x), compile_s=compile_seconds(adapter))


def ragged_rows(model: str, task: str, n: int, spec: str, batch: int, repeats: int) -> dict:
    """Another way, measured here only: today's eager path (ragged rounds, dynamic caches) with each layer's MLP and
    RMS norms compiled with dynamic shapes (attention and the caches stay eager); tokens/s against eager."""
    from engine.harness.bench import run_bench
    from engine.models.model import load_model
    from engine.runtime.jobs import configure
    configure(max_running=batch)
    mode("eager")
    adapter = load_model(model, device="cpu")
    inner = adapter.model.model
    parts = [(layer, k) for layer in inner.layers for k in ("mlp", "input_layernorm", "post_attention_layernorm")]
    parts += [(layer.self_attn, k) for layer in inner.layers for k in ("q_norm", "k_norm")] + [(inner, "norm")]
    eager = [getattr(p, k) for p, k in parts]
    fast = [torch.compile(m, dynamic=True) for m in eager]

    def use(mods):
        for (p, k), m in zip(parts, mods):
            setattr(p, k, m)
    use(fast)
    first_s, _ = seconds(lambda: run_bench(adapter, task, n, [spec], batch=batch, warmup=True))
    runs: dict = {"eager": [], "compiled": []}
    for _ in range(repeats):
        for label, mods in (("eager", eager), ("compiled", fast)):
            use(mods)
            (r,) = run_bench(adapter, task, n, [spec], batch=batch, warmup=True)
            runs[label].append(r)
            progress("run", dict(mode=label, tokens_per_s=r["tokens_per_s"], outcomes=r["outcomes"]))
    x = [c["tokens_per_s"] / e["tokens_per_s"] for c, e in zip(runs["compiled"], runs["eager"])]
    return dict(model=model, batch=batch, n=n, first_run_with_compiles_s=round(first_s, 1),
                same_rows=all(r["outcomes"] == runs["eager"][0]["outcomes"] for rs in runs.values() for r in rs),
                tokens_per_s={k: round(statistics.median(r["tokens_per_s"] for r in v), 1) for k, v in runs.items()},
                vs_eager=spread(x))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m tools.experiments.compiled")
    ap.add_argument("what", choices=("exact", "bench", "forward", "ragged", "class"))
    ap.add_argument("--only", default="", help="exact: decoder names, commas (default: every golden decode)")
    ap.add_argument("--model", default="unmask-tasks-small")
    ap.add_argument("--task", default="mix")
    ap.add_argument("--decoder", default="threshold:tau=0.9,block_size=8")
    ap.add_argument("--n", type=int, default=48)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dynamic", action="store_true", help="compile with dynamic shapes instead of one per bucket")
    args = ap.parse_args(argv)
    from engine.models import compiled
    torch.set_num_threads(1)
    compiled.DYNAMIC = args.dynamic
    if args.what == "class":
        out = class_rows(args.model, args.n, args.decoder, args.repeats)
    elif args.what == "ragged":
        out = ragged_rows(args.model, args.task, args.n, args.decoder, args.batch, args.repeats)
    elif args.what == "forward":
        out = forward_rows(args.model, [(1, 16), (8, 32), (12, 48)], 20)
    else:
        out = exact(tuple(filter(None, args.only.split(",")))) if args.what == "exact" else bench(
            args.model, args.task, args.n, args.decoder, args.batch, args.repeats)
    print(json.dumps(dict(out, dynamic=args.dynamic, graphs=compiled.graphs()), default=str))


if __name__ == "__main__":
    main()
