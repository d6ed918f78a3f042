"""Fast-dLLM's caches on a LLaDA-shaped model: time per token against generation length, in one run.

    python -m tools.experiments kv-cache --gens 64,256,512 --block 32     # ~100 M parameters, random weights

A random LlamaForCausalLM in LLaDA's layout (full attention, the engine's ``llada`` family facts) of about 100 M
parameters decodes one prompt with ``llada`` (block 32, 8 steps per block: 4 tokens per forward) under
``kv_cache`` none, prefix and dual, at each generation length; every setting runs once after a warm-up, in the same
process, and the table gives seconds per token and its ratio to ``none``. Random weights say nothing about
accuracy: the table also gives the share of tokens equal to ``none``'s decode (where the approximate caches change
the argmax). ``--hidden/--layers`` change the size.
"""

from __future__ import annotations

import torch

from engine.decoders import build_decoder
from engine.runtime.loop import Generation
from engine.tasks import get_task
from tools import provenance
from tools.bench.clock import seconds
from tools.gpu.common import shaped_adapter


def llada_shaped(hidden: int = 768, layers: int = 12, seed: int = 0):
    """A random model in LLaDA's layout, fp32 on the CPU, of about 85 M parameters at the defaults."""
    return shaped_adapter(dict(hidden=hidden, layers=layers, heads=hidden // 64, kv=hidden // 64, mlp=8 * hidden // 3,
                               vocab=None), "cpu", torch.float32, seed=seed, name=f"llada-shaped-{hidden}x{layers}")


def run(adapter, gens=(64, 256, 512), block: int = 32, steps: int = 8) -> list[dict]:
    prompt = get_task("arith").problems("test", 1)[0].prompt
    rows = []
    for gen in gens:
        decode = lambda kv: Generation(adapter, prompt, build_decoder(  # noqa: E731
            "llada", block_size=block, steps=steps, gen_length=gen, stop_at_eos=False, kv_cache=kv)).run()
        decode("dual")                                                     # warm-up at this length
        base = None
        for kv in ("none", "prefix", "dual"):
            wall, tr = seconds(lambda: decode(kv))
            s_per_token = wall / gen
            base = base or (tr, s_per_token)
            same = sum(a == b for a, b in zip(tr.generated_ids, base[0].generated_ids)) / gen
            rows.append(dict(gen_length=gen, kv_cache=kv, nfe=tr.nfe, ms_per_token=1e3 * s_per_token,
                             vs_none=s_per_token / base[1], tokens_equal_none=same))
            print(rows[-1], flush=True)
    return rows


def report(rows: list[dict], adapter) -> str:
    n = sum(p.numel() for p in adapter.model.parameters())
    lines = [f"{adapter.name}, {n / 1e6:.0f} M parameters, llada block 32, 8 steps per block (CPU, fp32, 1 thread)",
             "", "| generation length | kv_cache | NFE | ms / token | × none | tokens equal to none's |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['gen_length']} | {r['kv_cache']} | {r['nfe']} | {r['ms_per_token']:.1f} | {r['vs_none']:.2f} | "
              f"{r['tokens_equal_none']:.2f} |" for r in rows]
    return "\n".join(lines)


def main(args) -> None:
    from pathlib import Path
    adapter = llada_shaped(args.hidden, args.layers)
    rows = run(adapter, tuple(int(g) for g in args.gens.split(",")))
    print(report(rows, adapter))
    Path(args.out).mkdir(parents=True, exist_ok=True)
    provenance.write(Path(args.out, "kv_cache.json"), rows)
