"""The recorder's overhead: the worked example's loop (``llada_generate``) on an embedded model, recorded against
unrecorded, in one process (a benchmark, not a test: the figure is a ratio on this machine).

    python -m tools.record_examples.bench_overhead                       # gen 64, blocks of 8, 64 forwards
    python -m tools.record_examples.bench_overhead --gen-length 256 --block-length 32 --repeats 5

The two run alternately, ``--repeats`` times each after one warm-up of both; each figure is the median of its
runs, so a machine shared with other work slows both alike. Both wall time and the process's CPU time are
reported (on a machine whose cores other work shares, wall time waits for them; CPU time, at one thread, does not).
Both decode the same tokens (checked).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from engine.models.model import load_model
from engine.record import Recorder
from engine.tasks import get_task
from tools.record_examples.llada_generate import block_causal_mask, generate


def timed(adapter, prompt, settings: dict, am, recorded: bool) -> tuple[tuple[float, float], torch.Tensor]:
    t0, c0 = time.perf_counter(), time.process_time()
    if recorded:
        with Recorder(adapter.model, adapter.mask_token_id, prompt.shape[1], adapter.tokenizer,
                      block_size=settings["block_length"], args=settings) as rec:
            out = generate(adapter.model, prompt, mask_id=adapter.mask_token_id, attention_mask=am, **settings)
            rec.finish(out)
    else:
        out = generate(adapter.model, prompt, mask_id=adapter.mask_token_id, attention_mask=am, **settings)
    return (time.perf_counter() - t0, time.process_time() - c0), out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--gen-length", type=int, default=64)
    ap.add_argument("--block-length", type=int, default=8)
    ap.add_argument("--steps", type=int, default=0, help="forwards in all (default: one token a forward)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="torch's intra-op threads")
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    adapter = load_model(a.model, device="cpu")
    prompt = torch.tensor([adapter.encode_prompt(get_task("arith").problems("test", 1, seed=5)[0].prompt)])
    settings = dict(steps=a.steps or a.gen_length, gen_length=a.gen_length, block_length=a.block_length)
    am = block_causal_mask(prompt.shape[1] + a.gen_length, a.block_length, adapter.device)
    times = {False: [], True: []}
    outs = {}
    for i in range(a.repeats + 1):
        for recorded in (False, True):
            t, outs[recorded] = timed(adapter, prompt, settings, am, recorded)
            if i:                                   # the first of each: the warm-up
                times[recorded].append(t)
    assert torch.equal(outs[False], outs[True]), "the recorded loop decoded other tokens"
    n = settings["steps"]
    print(f"{adapter.name}, gen {a.gen_length}, blocks of {a.block_length}, {n} forwards, {a.threads} thread(s), "
          f"median of {a.repeats}:")
    for j, what in enumerate(("wall", "CPU")):
        plain, rec = (statistics.median(t[j] for t in times[k]) for k in (False, True))
        print(f"  {what:4s} unrecorded {plain * 1e3:.1f} ms ({plain / n * 1e3:.2f} ms/forward), recorded "
              f"{rec * 1e3:.1f} ms ({rec / n * 1e3:.2f} ms/forward): ratio {rec / plain:.3f}")


if __name__ == "__main__":
    main()
