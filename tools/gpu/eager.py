"""GPU check: the engine on random checkpoints of realistic width, in bf16, as one JSON.

    python -m tools.gpu.eager                 # on a CUDA machine (SDAR-1.7B-like and 8B-wide models)
    python -m tools.gpu.eager --tiny          # a CPU smoke run of the same code at toy width

Per model: forward latency per kind (draft, verify, commit), tokens/s and tokens/s vs AR for ar, threshold and S2D2
(router=always) at B = 4 and 16, tokens/s of threshold with 1, 8 and 32 problems decoded at once (batched
forwards), and the argmax agreement of cached vs uncached and of bf16 vs fp32 logits. Then kv_cache none / prefix
/ dual on an 8B-wide LLaDA-shaped model, and ar, threshold, subblock and S2D2 on a Fast-dLLM-v2-1.5B-shaped one.
Random weights never emit a stop token, so every decode runs its whole generation length.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import time

import numpy as np
import torch

from engine.decoders import build_decoder, parse_spec
from engine.runtime.loop import Generation
from engine.models.model import pick_device
from engine.tasks import get_task
from tools.bench.report import progress
from tools.gpu.common import shaped_adapter

MODELS = {"sdar-1.7b-like": dict(hidden=2048, layers=28, heads=16, kv=8, mlp=6144),
          "8b-wide-4-layers": dict(hidden=4096, layers=4, heads=32, kv=8, mlp=12288),
          "v2-1.5b-like": dict(hidden=1536, layers=28, heads=12, kv=2, mlp=8960),
          "tiny": dict(hidden=64, layers=2, heads=2, kv=1, mlp=128)}


def decode_rows(adapter, prompt: str, gen: int) -> list[dict]:
    rows = []
    for B in (4, 16):
        for spec in ("ar", f"threshold:tau=0.9,block_size={B}", f"s2d2:router=always,block_size={B}"):
            if spec == "ar" and B == 16:
                continue
            name, params = parse_spec(spec)
            pol = build_decoder(name, gen_length=gen, stop_at_eos=False, **params)
            Generation(adapter, prompt, pol).run()                         # warm-up
            tr = Generation(adapter, prompt, pol).run()
            lat = {k: float(np.median([r.wall_ms for r in tr.records if r.kind == k]))
                   for k in {r.kind for r in tr.records}}
            rows.append(dict(spec=spec, nfe=tr.nfe, tokens=tr.meta.generated_tokens, forward_ms=lat,
                             tokens_per_s=tr.meta.generated_tokens / tr.meta.wall_s))
    ar = next(r["tokens_per_s"] for r in rows if r["spec"] == "ar")
    for r in rows:
        r["vs_ar"] = r["tokens_per_s"] / ar
    return rows


def batch_rows(adapter, gen: int, sizes=(1, 8, 32), n: int = 64) -> list[dict]:
    """tokens/s of threshold (τ = 0.9, B = 4) on n problems, 1, 8 and 32 decodes per round
    (engine.runtime.scheduler)."""
    from engine.runtime.jobs import run_batched
    prompts = [p.prompt for p in get_task("arith").problems("test", n)]
    jobs = [lambda p=p: Generation(adapter, p, build_decoder("threshold", tau=0.9, block_size=4, gen_length=gen,
                                                             stop_at_eos=False)).requests() for p in prompts]
    rows = []
    for size in sizes:
        run_batched(jobs[:size], size)                            # warm-up at this batch size
        t0 = time.perf_counter()
        traces = run_batched(jobs, size)
        wall = time.perf_counter() - t0
        rows.append(dict(batch=size, problems=n, tokens_per_s=sum(t.meta.generated_tokens for t in traces) / wall))
    for r in rows:
        r["vs_batch_1"] = r["tokens_per_s"] / rows[0]["tokens_per_s"]
    return rows


def spec_rows(adapter, prompt: str, gen: int, specs: list[str]) -> list[dict]:
    """tokens/s and NFE of each SPEC (one decode after a warm-up), and its ratio to the first."""
    rows = []
    for spec in specs:
        name, params = parse_spec(spec)
        pol = build_decoder(name, gen_length=gen, stop_at_eos=False, **params)
        Generation(adapter, prompt, pol).run()
        tr = Generation(adapter, prompt, pol).run()
        rows.append(dict(spec=spec, nfe=tr.nfe, tokens_per_s=tr.meta.generated_tokens / tr.meta.wall_s))
    for r in rows:
        r["vs_first"] = r["tokens_per_s"] / rows[0]["tokens_per_s"]
    return rows


KV_SPECS = [f"llada:block_size=32,steps=8,kv_cache={kv}" for kv in ("none", "prefix", "dual")]
V2_SPECS = ["ar", "threshold:tau=0.9,block_size=32", "subblock:tau=0.9,block_size=32,sub_block=8",
            "s2d2:router=always,block_size=32", "s2d2:router=score,block_size=32"]


def agreement(adapter, prompt: str, gen: int) -> dict:
    pol = lambda c: build_decoder("threshold", tau=0.9, block_size=4, gen_length=gen, use_cache=c,  # noqa: E731
                                  stop_at_eos=False)
    a, b = (Generation(adapter, prompt, pol(c)).run() for c in (True, False))
    cached = float(np.mean([np.mean(x.candidate == y.candidate) for x, y in zip(a.records, b.records)]))
    ids = torch.tensor(a.meta.final_tokens)
    n = len(ids)
    mask = torch.ones(n, n, dtype=torch.bool).tril()
    low = adapter.forward(ids, mask, torch.arange(n)).argmax(-1)
    # an fp32 copy (casting the model back and forth would also cast the fp32 RoPE tables)
    full = dataclasses.replace(adapter, model=copy.deepcopy(adapter.model).float(), dtype=torch.float32)
    high = full.forward(ids, mask, torch.arange(n)).argmax(-1)
    del full
    return dict(cached_vs_uncached=cached, low_vs_fp32=float((low == high).float().mean()))


def gsm8k_rows(path: str, device, n: int, gen: int) -> list[dict]:
    """The field's number on a real checkpoint: threshold and S2D2 (where it applies) on the first n GSM8K test
    problems, batched, with the usual row fields (accuracy with its interval, NFE, TPF, tokens/s)."""
    from engine.catalogue.applies import why_not
    from engine.harness.bench import run_bench
    from engine.models.model import load_model
    adapter = load_model(path, device=str(device))
    specs = [f"threshold:tau=0.9,block_size=32,gen_length={gen}"]
    if why_not("s2d2", adapter) is None:
        specs.append(f"s2d2:block_size=32,gen_length={gen}")
    return run_bench(adapter, "gsm8k", n, specs, batch=8)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiny", action="store_true", help="toy width on any device (a smoke run)")
    ap.add_argument("--gen", type=int, default=64)
    ap.add_argument("--device")
    ap.add_argument("--checkpoint", help="also bench GSM8K on this checkpoint (a local path): threshold and S2D2")
    ap.add_argument("--gsm8k-n", type=int, default=50, help="GSM8K problems for --checkpoint")
    ap.add_argument("--gsm8k-gen", type=int, default=256, help="generation length for --checkpoint")
    ap.add_argument("--batch-problems", type=int, default=64, help="problems for the batched tokens/s")
    args = ap.parse_args(argv)
    device = pick_device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    prompt = get_task("arith").problems("test", 1)[0].prompt
    out = dict(device=str(device), dtype=str(dtype), torch=torch.__version__,
               gpu=torch.cuda.get_device_name() if device.type == "cuda" else None, models={})
    for name in (["tiny"] if args.tiny else ["sdar-1.7b-like", "8b-wide-4-layers"]):
        t0 = time.perf_counter()
        adapter = shaped_adapter(MODELS[name], device, dtype, kind="sdar")
        params = sum(p.numel() for p in adapter.model.parameters())
        out["models"][name] = dict(params=params, decoders=decode_rows(adapter, prompt, args.gen),
                                   batched=batch_rows(adapter, args.gen, n=args.batch_problems),
                                   argmax_agreement=agreement(adapter, prompt, args.gen),
                                   seconds=round(time.perf_counter() - t0, 1))
        progress(name, out["models"][name])
        del adapter
        if device.type == "cuda":
            torch.cuda.empty_cache()
    for kind, specs in (("llada", KV_SPECS), ("fast_dllm_v2", V2_SPECS)):
        shape = MODELS["tiny"] if args.tiny else MODELS["8b-wide-4-layers" if kind == "llada" else "v2-1.5b-like"]
        adapter = shaped_adapter(shape, device, dtype, kind=kind)
        out["models"][f"{kind}-shaped"] = dict(params=sum(p.numel() for p in adapter.model.parameters()),
                                               decoders=spec_rows(adapter, prompt, max(args.gen, 64), specs))
        progress(f"{kind}-shaped", out["models"][f"{kind}-shaped"])
        del adapter
        if device.type == "cuda":
            torch.cuda.empty_cache()
    if args.checkpoint:
        out["gsm8k"] = gsm8k_rows(args.checkpoint, device, args.gsm8k_n, args.gsm8k_gen)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
