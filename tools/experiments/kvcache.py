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

import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from engine.decoders import build_decoder
from engine.runtime.loop import Generation
from engine.models.model import ModelAdapter
from engine.tasks import get_task, task_tokenizer
from tools import provenance


def llada_shaped(hidden: int = 768, layers: int = 12, seed: int = 0) -> ModelAdapter:
    tok = task_tokenizer(get_task("mix"))
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=hidden, num_hidden_layers=layers,
                      num_attention_heads=hidden // 64, num_key_value_heads=hidden // 64, intermediate_size=8 * hidden // 3,
                      max_position_embeddings=2048, rope_parameters={"rope_type": "default", "rope_theta": 5e5},
                      tie_word_embeddings=False)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(8.0)            # a spread of confidences, as a trained model has
    return ModelAdapter(model=model, tokenizer=tok, name=f"llada-shaped-{hidden}x{layers}", model_type="llada",
                        mask_token_id=tok.mask_token_id, logit_shift=0, attention="full", block_size=None,
                        stop_ids=(), attn_impl="sdpa", device=torch.device("cpu"), dtype=torch.float32,
                        prompt_template="Q : {} A :")


def run(adapter, gens=(64, 256, 512), block: int = 32, steps: int = 8) -> list[dict]:
    prompt = get_task("arith").problems("test", 1)[0].prompt
    rows = []
    for gen in gens:
        decode = lambda kv: Generation(adapter, prompt, build_decoder(  # noqa: E731
            "llada", block_size=block, steps=steps, gen_length=gen, stop_at_eos=False, kv_cache=kv)).run()
        decode("dual")                                                     # warm-up at this length
        base = None
        for kv in ("none", "prefix", "dual"):
            t0 = time.perf_counter()
            tr = decode(kv)
            s_per_token = (time.perf_counter() - t0) / gen
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
