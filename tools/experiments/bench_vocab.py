"""Every decoder's milliseconds per forward on this CPU with the output layer widened to LLaDA's 126 464 tokens,
against the threshold rule's in the same process (issue 66's CPU target: within 1.5x).

    python -m tools.experiments.bench_vocab --n 4 --json            # this tree
    PYTHONPATH=/path/to/other/checkout python -m tools.experiments.bench_vocab --n 4   # another commit, same script

The embedded ``unmask-tasks-small`` (its drafter for SimSD, ``unmask-uniform-small`` for the canvas, a seeded random
Dream-type checkpoint for Dream's sampler) decodes ``--n`` arithmetic problems per decoder, one at a time; every
forward's logits get 126 464 − V more columns, each 30 below the row's least logit (their mass about 1e-8), so the
rules read a vocabulary of LLaDA's width (the canvas model excepted: ``widened``). Decoders take turns, ``--rounds``
times, and each figure is the median of its rounds' ms per forward (engine wall over NFE); the ratio is against
``threshold``'s median on the same model (the canvas model takes no threshold rule: the tasks model's).
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

WIDTH = 126_464
SPECS = [("tasks", "ar"), ("tasks", "llada:block_size=8,steps=8"), ("tasks", "threshold:tau=0.9,block_size=8"),
         ("tasks", "eb:block_size=8"), ("tasks", "s2d2:block_size=8"), ("tasks", "tspd:block_size=8"),
         ("tasks", "prophet:block_size=8"), ("tasks", "klass:block_size=8"), ("tasks", "credit:block_size=8"),
         ("tasks", "edit:block_size=8"), ("tasks", "wino:block_size=8"), ("tasks", "remdm:block_size=8,steps=8"),
         ("tasks", "subblock:block_size=8,sub_block=4"), ("tasks", "simsd:block_size=8"),
         ("uniform", "uniform"), ("dream", "threshold:tau=0.9,block_size=32,gen_length=32"),
         ("dream", "dream:gen_length=32,steps=16")]
BASELINE = "threshold:tau=0.9"


def widened(width: int) -> None:
    """Patch the scheduler's forwards to return ``width`` columns. (The canvas model's are left as they are: its
    logits condition its next forward, so the uniform row reads its own 8 000-odd tokens.)"""
    import engine.runtime.scheduler as sched
    run = sched.run_forwards

    def wide(x):
        low = x.amin(-1, keepdim=True) - 30
        return torch.cat([x, low.expand(*x.shape[:-1], width - x.shape[-1])], -1)
    sched.run_forwards = lambda adapter, reqs: [wide(x) for x in run(adapter, reqs)]


def models():
    import tempfile
    from pathlib import Path

    from engine.models.model import load_model
    out = {"tasks": load_model("unmask-tasks-small", device="cpu"),
           "uniform": load_model("unmask-uniform-small", device="cpu")}
    try:
        from tests.families import write_qwen2_family
        out["dream"] = load_model(str(write_qwen2_family(Path(tempfile.mkdtemp()) / "d", "Dream", 0)), device="cpu")
    except ImportError:                               # a checkout without the tests' model writer
        pass
    return out


def ms_per_forward(adapter, spec: str, prompts: list[str]) -> float:
    from engine.decoders import build_decoder, parse_spec
    from engine.runtime.loop import Generation
    name, params = parse_spec(spec)
    wall = nfe = 0
    for p in prompts:
        tr = Generation(adapter, p, build_decoder(name, **params)).run()
        wall, nfe = wall + tr.meta.wall_s, nfe + tr.meta.nfe
    return 1e3 * wall / nfe


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=4, help="problems per decoder and round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--width", type=int, default=WIDTH)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    from engine.tasks import get_task
    ms = models()
    widened(args.width)
    prompts = {"arith": [p.prompt for p in get_task("arith").problems("test", args.n, seed=0)],
               "story": [p.prompt for p in get_task("story").problems("test", args.n, seed=0)]}
    runs: dict[tuple, list[float]] = {}
    for _ in range(args.rounds):
        for model, spec in SPECS:
            if model in ms:
                on = prompts["story"] if spec.startswith("simsd") else prompts["arith"]
                runs.setdefault((model, spec), []).append(ms_per_forward(ms[model], spec, on))
    base = {m: statistics.median(v) for (m, s), v in runs.items() if s.startswith(BASELINE)}
    rows = [dict(model=m, spec=s, ms_per_forward=statistics.median(v), rounds=[round(x, 2) for x in v],
                 over_threshold=statistics.median(v) / base.get(m, base["tasks"])) for (m, s), v in runs.items()]
    if args.json:
        print(json.dumps(dict(width=args.width, n=args.n, rows=rows), indent=1))
        return
    print(f"| model | decoder | ms per forward (V = {args.width:,}) | over threshold |\n|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | `{r['spec']}` | {r['ms_per_forward']:.2f} | {r['over_threshold']:.2f}x |")


if __name__ == "__main__":
    main()
