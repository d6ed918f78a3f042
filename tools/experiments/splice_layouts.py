"""Fast-dLLM's dual cache in a batched round: batched in the layout (``engine.runtime.batch``) against kept apart
(each spliced request its own forward, as ``batchable`` would do if it refused them), in one process.

    python -m tools.experiments.splice_layouts --decodes 8 --gen 64 --repeats 3

``--decodes`` decodes of ``--spec`` (default a dual-cache threshold decode) on a random LLaDA-shaped model
(``tools.experiments.kvcache.llada_shaped``, ``--hidden``/``--layers``) run through the engine loop together, in
each layout forced by ``UNMASK_LAYOUT``, once batched and once with every round holding a splice run request by
request. The two runs alternate ``--repeats`` times after a warm-up (a shared machine drifts); the table gives each
run's median wall time and the median of the per-repeat ratios apart / batched (above 1: batching pays), and checks
both runs write the same tokens.
"""

from __future__ import annotations

import argparse
import statistics
from contextlib import contextmanager

import torch

from engine.decoders import build_decoder, parse_spec
from engine.runtime import batch
from engine.runtime.cache import SpliceCache
from engine.runtime.jobs import run_batched
from engine.runtime.loop import Generation
from engine.tasks import get_task
from tools.bench.clock import seconds
from tools.bench.report import progress
from tools.bench.settings import settings
from tools.experiments.kvcache import llada_shaped


@contextmanager
def apart(on: bool):
    """Rounds that hold a splice run request by request (``batchable`` says no) while ``on``."""
    plain = batch.batchable
    if on:
        batch.batchable = lambda reqs: plain(reqs) and not any(isinstance(r.cache, SpliceCache) for r in reqs)
    try:
        yield
    finally:
        batch.batchable = plain


def timed(adapter, spec: str, n: int, gen: int, keep_apart: bool) -> tuple[float, list]:
    name, params = parse_spec(spec)
    prompts = [p.prompt for p in get_task("arith").problems("test", n, seed=1)]
    jobs = [lambda p=p: Generation(adapter, p, build_decoder(name, gen_length=gen, stop_at_eos=False,
                                                             **params)).requests() for p in prompts]
    with apart(keep_apart):
        wall, traces = seconds(lambda: run_batched(jobs, n))
    return wall, [t.meta.token_ids for t in traces]


def run(adapter, spec: str, n: int, gen: int, repeats: int, layouts=("ragged", "packed", "padded")) -> list[dict]:
    rows = []
    for layout in layouts:
        with settings(UNMASK_LAYOUT=layout):
            rows.append(compare(adapter, spec, n, gen, repeats, layout))
        progress("layout", rows[-1])
    return rows


def compare(adapter, spec: str, n: int, gen: int, repeats: int, layout: str) -> dict:
    """One layout's row: batched and kept apart in turn, ``repeats`` times after a warm-up."""
    timed(adapter, spec, n, gen, False)                                   # warm-up
    walls: dict = {False: [], True: []}
    tokens: dict = {}
    for _ in range(repeats):
        for keep_apart in (False, True):
            wall, tokens[keep_apart] = timed(adapter, spec, n, gen, keep_apart)
            walls[keep_apart].append(wall)
    ratios = [a / b for a, b in zip(walls[True], walls[False])]
    return dict(layout=layout, batched_s=statistics.median(walls[False]), apart_s=statistics.median(walls[True]),
                apart_over_batched=statistics.median(ratios), ratio_range=(min(ratios), max(ratios)),
                same_tokens=tokens[False] == tokens[True])


def report(rows: list[dict], adapter, spec: str, n: int, gen: int) -> str:
    size = sum(p.numel() for p in adapter.model.parameters()) / 1e6
    lines = [f"{n} decodes of `{spec}`, gen {gen}, {adapter.name} ({size:.0f} M parameters, CPU, "
             f"{torch.get_num_threads()} thread(s))", "",
             "| layout | batched, s | kept apart, s | apart / batched (range) | same tokens |", "|---|---|---|---|---|"]
    lines += [f"| {r['layout']} | {r['batched_s']:.2f} | {r['apart_s']:.2f} | {r['apart_over_batched']:.2f} "
              f"({r['ratio_range'][0]:.2f} – {r['ratio_range'][1]:.2f}) | {r['same_tokens']} |" for r in rows]
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default="threshold:tau=0.9,block_size=8,kv_cache=dual")
    ap.add_argument("--decodes", type=int, default=8)
    ap.add_argument("--gen", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    adapter = llada_shaped(args.hidden, args.layers)
    rows = run(adapter, args.spec, args.decodes, args.gen, args.repeats)
    print(report(rows, adapter, args.spec, args.decodes, args.gen))


if __name__ == "__main__":
    main()
