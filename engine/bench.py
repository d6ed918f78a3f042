"""Benchmark decoders on a task's held-out split, all in one process so speed ratios are fair on a noisy machine.

Per decoder: accuracy (exact-match final answer), NFE per sample, TPF (generated tokens per forward, the stop
token included since it cost a forward), tokens/s (generated tokens / decode wall time) and the speed ratio of
tokens/s to the first decoder. Decoders run interleaved problem by problem, so drift in machine speed hits all
of them alike.
"""

from __future__ import annotations

import time
from collections import defaultdict

from engine.decoders import build_decoder, parse_spec
from engine.loop import Generation
from engine.tasks import get_task


def run_bench(adapter, task_name: str, n: int, specs: list[str], seed: int = 0, split: str = "test",
              progress=None) -> list[dict]:
    task = get_task(task_name)
    problems = task.problems(split, n, seed=seed)
    policies = []
    for spec in specs:
        name, params = parse_spec(spec)
        policies.append((spec, name, build_decoder(name, **params)))
    Generation(adapter, problems[0].prompt, policies[0][2]).run()  # warm-up: first-call allocations
    acc = defaultdict(lambda: defaultdict(float))
    for i, prob in enumerate(problems):
        for spec, _, policy in policies:
            t0 = time.perf_counter()
            tr = Generation(adapter, prob.prompt, policy).run()
            a = acc[spec]
            a["wall"] += time.perf_counter() - t0
            a["correct"] += task.check(tr.meta["text"], prob)
            a["nfe"] += tr.nfe
            a["tokens"] += tr.meta["generated_tokens"]
            for kind, k in tr.meta["nfe_by_kind"].items():
                a[f"nfe_{kind}"] += k
            a["accepted_tokens"] += tr.meta.get("accepted_tokens", 0)
        if progress:
            progress(i + 1, len(problems))
    rows = []
    for spec, name, policy in policies:
        a = acc[spec]
        rows.append(dict(decoder=name, spec=spec, params=policy.cfg.params(), n=len(problems),
                         accuracy=a["correct"] / len(problems), nfe=a["nfe"] / len(problems),
                         tpf=a["tokens"] / max(1, a["nfe"]), tokens_per_s=a["tokens"] / max(a["wall"], 1e-9),
                         nfe_by_kind={k[4:]: v / len(problems) for k, v in a.items() if k.startswith("nfe_")},
                         accepted_tokens=a["accepted_tokens"] / len(problems),
                         wall_s=a["wall"]))
    base = rows[0]["tokens_per_s"]
    for r in rows:
        r["speedup"] = r["tokens_per_s"] / base
    return rows


def format_table(rows: list[dict]) -> str:
    head = f"{'decoder spec':44s} {'acc':>6s} {'NFE':>7s} {'TPF':>6s} {'tok/s':>8s} {'speedup':>8s}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['spec']:44s} {r['accuracy']:6.3f} {r['nfe']:7.2f} {r['tpf']:6.2f} "
                     f"{r['tokens_per_s']:8.1f} {r['speedup']:7.2f}x")
    return "\n".join(lines)
