"""The GPU check of the static path (engine/models/static.py): one prepared run on a CUDA machine, as one JSON.

    python -m tools.experiments.gpu_static --device cuda --refs .refs --out results.json   # the H200 check
    python -m tools.experiments.gpu_static --tiny                                          # a CPU smoke run

On random weights of LLaDA-8B's shape (bf16, 32 layers, hidden 4096, MLP 12 288, vocabulary 126 464; the rows past
the task tokenizer's vocabulary zeroed so that every decoded id is a real token), after the clocks are warmed:

* ``forward``: per forward at batch 1 and 12 over 32 and 128 rows: the adapter's eager call (today's path), the
  engine's static call (buffers filled, graph replayed, rows copied out), the bare model replayed from a CUDA graph,
  the GPU's kernel time (torch's profiler, over the static call) and the weight-read bound (bytes / 4.8 TB/s).
* ``decodes``: tokens/s and ms per forward of ``threshold`` (τ 0.9, B 32, 256 slots) and ``llada`` (B 32, one token a
  step, 64 slots) at batch 1, static and eager (``UNMASK_STATIC``), with the tokens compared; ``threshold`` at batch
  12; the released loops (LLaDA's ``generate.py``, Fast-dLLM's ``generate`` with its threshold) on the same model
  and problems at equal NFE, calling ``model(x).logits`` with a full mask made on the device; ``llada``'s tokens
  are compared with both confidence precisions (``precision_model_same_tokens``: ranked in bf16 over the canvas).
* ``graph_vs_eager``: the same decode with graphs on and off over the static buffers: tokens equal (asserted).
* ``caches``: Fast-dLLM's none / prefix / dual with an 8-token and a 1 000-token prompt at 256 slots.
* ``s2d2``: S2D2's draft and verify forwards (block-causal masks over the same weights), median ms each.
* ``compiled``: the static path eager and compiled (``UNMASK_COMPILE=on``, tools.experiments.compiled.gpu_rows).

Every figure is measured on the machine that runs it; nothing here is an expectation.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

from tools.experiments.compiled import gpu_rows as compiled_rows
from tools.experiments.host_overhead import kernel_ms, load_reference, now, warm_up
from tools import provenance

LLADA_8B = dict(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=32,
                intermediate_size=12288, vocab_size=126_464)
TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
            intermediate_size=128, vocab_size=4096)
HBM_BYTES_PER_S = 4.8e12      # the H200's datasheet bandwidth


def llada_adapter(shape: dict, device, dtype):
    """A random Llama of ``shape`` as a full-attention (LLaDA-layout) adapter with the task tokenizer."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from engine.models.model import ModelAdapter
    from engine.tasks import get_task, task_tokenizer
    tok = task_tokenizer(get_task("mix"))
    cfg = LlamaConfig(**shape, max_position_embeddings=4096, tie_word_embeddings=False,
                      rope_parameters={"rope_type": "default", "rope_theta": 5e5})
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(cfg).to(dtype).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(8.0)               # a spread of confidences, as a trained model has
        model.lm_head.weight[len(tok):] = 0          # ids past the tokenizer's never win: decoded text stays text
    for m in model.modules():                        # RoPE tables stay fp32 (engine/models/precision.py)
        if hasattr(m, "inv_freq"):
            m.inv_freq = m.inv_freq.float()
    return ModelAdapter(model=model, tokenizer=tok, name="llada-8b-shaped", model_type="llada",
                        mask_token_id=tok.mask_token_id, logit_shift=0, attention="full", block_size=None,
                        stop_ids=(), attn_impl="sdpa", device=torch.device(device), dtype=dtype,
                        prompt_template="Q : {} A :")


def timed(fn, reps: int) -> float:
    """Median ms of ``fn`` after two warm-up calls."""
    fn(), fn()
    times = []
    for _ in range(reps):
        t0 = now()
        fn()
        times.append(now() - t0)
    return 1e3 * statistics.median(times)


def graph_ms(adapter, ids, mask, pos, reps: int) -> float | None:
    """The bare model call replayed from a CUDA graph (None on a CPU)."""
    if adapter.device.type != "cuda":
        return None
    call = lambda: adapter.model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=False)  # noqa
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        call(), call()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g), torch.no_grad():
        call()
    ms = timed(g.replay, reps)
    del g
    return ms


def forward_rows(adapter, reps: int) -> list[dict]:
    from engine.models.static import StaticPath
    from engine.runtime.scheduler import Forward
    dev, V = adapter.device, adapter.vocab_size
    weight_bytes = sum(p.numel() * p.element_size() for p in adapter.model.parameters())
    out = []
    for batch in (1, 12):
        for n in (32, 128):
            ids = torch.randint(0, 500, (batch, n))
            mask, pos = torch.ones(batch, n, n, dtype=torch.bool), torch.arange(n).expand(batch, n)
            reqs = [Forward(adapter, ids[b], mask[b], pos[b], None) for b in range(batch)]
            static = STATIC(StaticPath.of, adapter)
            row = dict(batch=batch, rows=n, eager_ms=timed(lambda: adapter.run(ids, mask, pos), reps),
                       static_ms=timed(lambda: static.run(reqs), reps),
                       graph_ms=graph_ms(adapter, ids.to(dev), mask[:, None].to(dev), pos.to(dev), reps),
                       bound_ms=1e3 * weight_bytes / HBM_BYTES_PER_S, vocab=V)
            if dev.type == "cuda":
                row["kernel_ms"] = kernel_ms(lambda: static.run(reqs))
            out.append(row)
            progress("forward", row)
    return out


def decode(adapter, prompt, spec: str) -> dict:
    from engine.decoders import build_decoder, parse_spec
    from engine.runtime.loop import Generation
    name, params = parse_spec(spec)
    pol = lambda: build_decoder(name, stop_at_eos=False, **params)                               # noqa: E731
    Generation(adapter, prompt, pol()).run()                                                     # warm-up
    t0 = now()
    tr = Generation(adapter, prompt, pol()).run()
    wall = now() - t0
    return dict(spec=spec, nfe=tr.nfe, tokens=tr.meta.generated_tokens, tokens_per_s=tr.meta.generated_tokens / wall,
                ms_per_forward=1e3 * wall / tr.nfe, path=tr.meta.forward_path, ids=tr.meta.token_ids)


def with_env(**env):
    """Run ``fn`` with these UNMASK_* settings (the static path reads them per round)."""
    def run(fn, *args):
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            return fn(*args)
        finally:
            for k, v in old.items():
                os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    return run


STATIC, EAGER = with_env(UNMASK_STATIC="on", UNMASK_CUDA_GRAPHS="1"), with_env(UNMASK_STATIC="off")
NO_GRAPHS = with_env(UNMASK_STATIC="on", UNMASK_CUDA_GRAPHS="0")


def pair(adapter, prompt, spec: str) -> dict:
    """One decode static (graphs) and eager (today's path): tokens/s of each and whether their tokens agree."""
    s, e = STATIC(decode, adapter, prompt, spec), EAGER(decode, adapter, prompt, spec)
    return dict(spec=spec, static=strip(s), eager=strip(e), speedup=s["tokens_per_s"] / e["tokens_per_s"],
                same_tokens=s["ids"] == e["ids"])


def strip(d: dict) -> dict:
    return {k: v for k, v in d.items() if k != "ids"}


class Bare(torch.nn.Module):
    """The model as the released loops call it, ``model(x).logits`` over the whole canvas, with a full mask made on
    the device (no host work of Unmask's on their side)."""

    def __init__(self, adapter):
        super().__init__()
        self.model, self.device = adapter.model, adapter.device

    def forward(self, x, **_):        # LLaDA's loop passes attention_mask=None (no padding)
        B, n = x.shape
        mask = torch.ones(B, 1, n, n, dtype=torch.bool, device=x.device)
        pos = torch.arange(n, device=x.device).expand(B, n)
        return self.model(input_ids=x, attention_mask=mask, position_ids=pos, use_cache=False)


def released_rows(adapter, refs: Path, problems: list, gen: int) -> list[dict]:
    """Unmask's ``llada`` and ``threshold`` (static path) against LLaDA's and Fast-dLLM's released loops at equal
    NFE, batch 1, one problem after another: ms per forward of each and how many problems give equal tokens."""
    loops = {"llada": (load_reference(str(refs), "llada_generate.py", "llada_generate").generate,
                       dict(steps=gen), f"llada:block_size=32,steps=32,gen_length={gen}"),
             "threshold": (load_reference(str(refs), "fastdllm_generate.py", "fastdllm_generate").generate,
                           dict(steps=gen, threshold=0.9), f"threshold:tau=0.9,block_size=32,gen_length={gen}")}
    bare, out = Bare(adapter), []
    for name, (generate, kwargs, spec) in loops.items():
        ours = [STATIC(decode, adapter, p, spec) for p in problems]
        eager = [EAGER(decode, adapter, p, spec)["ids"] for p in problems]
        theirs, nfe, t0 = [], 0, now()
        for p in problems:
            ids = torch.tensor([adapter.encode_prompt(p)], device=adapter.device)
            with torch.no_grad():
                x = generate(bare, ids, gen_length=gen, block_length=32, mask_id=adapter.mask_token_id, **kwargs)
            nfe += x[1] if isinstance(x, tuple) else kwargs["steps"]
            theirs.append((x[0] if isinstance(x, tuple) else x)[0, ids.shape[1]:].tolist())
        wall = now() - t0
        ours_ms = statistics.mean(o["ms_per_forward"] for o in ours)
        row = dict(loop=name, problems=len(problems), unmask_ms_per_forward=ours_ms,
                   unmask_nfe=sum(o["nfe"] for o in ours), released_nfe=nfe,
                   released_ms_per_forward=1e3 * wall / nfe,
                   unmask_tokens_per_s=statistics.mean(o["tokens_per_s"] for o in ours),
                   same_tokens=sum(o["ids"] == t for o, t in zip(ours, theirs)),
                   eager_same_tokens=sum(e == t for e, t in zip(eager, theirs)))
        if name == "llada":          # ranked in the logits' dtype, as generate.py as first released ranks them
            model = [STATIC(decode, adapter, p, spec + ",precision=model")["ids"] for p in problems]
            row["precision_model_same_tokens"] = sum(m == t for m, t in zip(model, theirs))
        row["speedup_per_forward"] = row["released_ms_per_forward"] / ours_ms
        out.append(row)
        progress("released", row)
    return out


def batched(adapter, problems: list, spec: str, size: int, **extra) -> tuple[list, float]:
    """``spec`` on every problem, ``size`` decodes a round: the traces and the wall seconds."""
    from engine.decoders import build_decoder, parse_spec
    from engine.runtime.jobs import run_batched
    from engine.runtime.loop import Generation
    name, params = parse_spec(spec)
    jobs = [lambda p=p: Generation(adapter, p, build_decoder(name, **params, **extra)).requests() for p in problems]
    t0 = now()
    traces = run_batched(jobs, size)
    return traces, now() - t0


def batch_rows(adapter, problems: list, spec: str) -> list[dict]:
    """``spec`` on every problem at once (one round holds them all), static and eager: tokens/s of each."""
    out, n = [], len(problems)
    for label, env in (("static", STATIC), ("eager", EAGER)):
        def go():
            batched(adapter, problems, spec, n, stop_at_eos=False)       # warm-up: every bucket met once
            return batched(adapter, problems, spec, n, stop_at_eos=False)
        traces, wall = env(go)
        out.append(dict(path=label, batch=n, spec=spec, rounds=max(t.nfe for t in traces),
                        tokens_per_s=sum(t.meta.generated_tokens for t in traces) / wall,
                        ms_per_round=1e3 * wall / max(t.nfe for t in traces),
                        ids=[t.meta.token_ids for t in traces]))
    same = sum(a == b for a, b in zip(out[0].pop("ids"), out[1].pop("ids")))
    out[0]["speedup"], out[0]["same_tokens"] = out[0]["tokens_per_s"] / out[1]["tokens_per_s"], same
    progress("batch", out)
    return out


def cache_rows(adapter, prompts: dict, gen: int) -> list[dict]:
    """Fast-dLLM's caches (``llada`` B 32, 8 steps a block) on each prompt: tokens/s, and against no cache."""
    out = []
    for label, ids in prompts.items():
        rows = [STATIC(decode, adapter, ids, f"llada:block_size=32,steps={8 * gen // 32},gen_length={gen},"
                                              f"kv_cache={kv}") for kv in ("none", "prefix", "dual")]
        for r in rows:
            out.append(dict(prompt=label, prompt_tokens=len(ids), **strip(r),
                            vs_none=r["tokens_per_s"] / rows[0]["tokens_per_s"]))
        progress("caches", out[-3:])
    return out


def s2d2_rows(adapter, prompt, gen: int) -> list[dict]:
    """S2D2's draft and verify forwards on the same weights under block-causal masks: median ms of each kind."""
    from engine.decoders import build_decoder
    from engine.runtime.loop import Generation
    bc = dataclasses.replace(adapter, attention="block_causal", block_size=32)
    out = []
    for use_cache in (1, 0):
        def go():
            pol = lambda: build_decoder("s2d2", router="always", block_size=32, gen_length=gen,  # noqa: E731
                                        use_cache=bool(use_cache), stop_at_eos=False)
            Generation(bc, prompt, pol()).run()
            return Generation(bc, prompt, pol()).run()
        tr = STATIC(go)
        kinds = {r.kind for r in tr.records}
        out.append(dict(use_cache=use_cache, nfe=tr.nfe, path=tr.meta.forward_path, ms={
            k: statistics.median(r.wall_ms for r in tr.records if r.kind == k) for k in kinds}))
        progress("s2d2", out[-1])
    return out


def busy_rows(adapter, prompt, spec: str) -> dict:
    """How busy the GPU is during a batch-1 decode on the static path: its kernels' time (torch's profiler, one
    decode) over the wall of the same decode unprofiled."""
    from torch.profiler import ProfilerActivity, profile
    row = STATIC(decode, adapter, prompt, spec)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        STATIC(decode, adapter, prompt, spec)        # its own warm-up decode and the timed one: two decodes
        torch.cuda.synchronize()
    kernels = sum(e.self_device_time_total for e in prof.key_averages()) / 1e3 / 2     # ms per decode
    wall = 1e3 * row["tokens"] / row["tokens_per_s"]
    out = dict(spec=spec, wall_ms=wall, kernel_ms=kernels, busy=kernels / wall, nfe=row["nfe"],
               ms_per_forward=row["ms_per_forward"], path=row["path"])
    progress("busy", out)
    return out


def graph_vs_eager(adapter, prompt, spec: str) -> dict:
    """The same decode with graphs and without (eager over the same static buffers): tokens must be equal."""
    g, e = STATIC(decode, adapter, prompt, spec), NO_GRAPHS(decode, adapter, prompt, spec)
    out = dict(spec=spec, graphs=strip(g), no_graphs=strip(e), same_tokens=g["ids"] == e["ids"])
    progress("graph_vs_eager", out)
    assert out["same_tokens"], f"a graph replay wrote other tokens than eager at the same shapes: {out}"
    return out


def embedded_rows(name: str, n: int) -> list[dict]:
    """An embedded model on this machine (the CPU's figures): ``threshold`` over n arithmetic problems at batch 1
    and 8, today's path and the static path alternating three times in one process; tokens/s of each."""
    from engine.models.model import load_model
    from engine.tasks import get_task
    adapter = load_model(name, device="cpu")
    problems = [p.prompt for p in get_task("arith").problems("test", n, seed=0)]
    spec, out = "threshold:tau=0.9,block_size=8", []
    for batch in (1, 8):
        runs = {"today": [], "static": []}
        for _ in range(3):
            for label, env in (("today", EAGER), ("static", NO_GRAPHS)):
                runs[label].append(env(tokens_per_s, adapter, problems, spec, batch))
        row = {k: statistics.median(v) for k, v in runs.items()}
        out.append(dict(model=name, batch=batch, problems=n, today_tokens_per_s=row["today"],
                        static_tokens_per_s=row["static"], static_vs_today=row["static"] / row["today"]))
        progress("embedded", out[-1])
    return out


def tokens_per_s(adapter, problems: list, spec: str, batch: int) -> float:
    traces, wall = batched(adapter, problems, spec, batch)
    return sum(t.meta.generated_tokens for t in traces) / wall


def progress(name: str, value) -> None:
    print(json.dumps({name: value}), file=sys.stderr, flush=True)


def sections(adapter, args, problems: list) -> dict:
    """Each section's callable, in the order they run."""
    long_prompt = (adapter.encode_prompt(problems[0]) * 60)[:1000]
    spec256 = f"threshold:tau=0.9,block_size=32,gen_length={args.gen}"
    return {
        "forward": lambda: forward_rows(adapter, args.reps),
        "graph_vs_eager": lambda: graph_vs_eager(adapter, problems[0], spec256),
        "threshold_batch1": lambda: pair(adapter, problems[0], spec256),
        "busy": lambda: busy_rows(adapter, problems[0], spec256) if adapter.device.type == "cuda" else None,
        "llada_batch1": lambda: pair(adapter, problems[0], f"llada:block_size=32,steps=32,gen_length={args.short}"),
        "released": lambda: released_rows(adapter, Path(args.refs), problems[:4], args.short) if args.refs else None,
        "batch12": lambda: batch_rows(adapter, problems[:12], spec256),
        "caches": lambda: cache_rows(adapter, {"8 tokens": adapter.encode_prompt(problems[0])[:8],
                                               "1000 tokens": long_prompt}, args.gen),
        "s2d2": lambda: s2d2_rows(adapter, problems[0], args.short),
        "compiled": lambda: compiled_rows(adapter, problems[0], spec256, args.reps),     # UNMASK_COMPILE=on
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="toy width, on the CPU unless --device says otherwise")
    ap.add_argument("--refs", default="", help="a folder with LLaDA's generate.py as llada_generate.py and "
                    "Fast-dLLM's llada/generate.py as fastdllm_generate.py")
    ap.add_argument("--gen", type=int, default=256, help="slots of the threshold and cache decodes")
    ap.add_argument("--short", type=int, default=64, help="slots of the llada, released-loop and S2D2 decodes")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--only", default="", help="sections to run, commas (default: all)")
    ap.add_argument("--out", default="")
    ap.add_argument("--embedded", default="", help="instead: an embedded model on the CPU, static vs today")
    ap.add_argument("--n", type=int, default=48, help="problems for --embedded")
    args = ap.parse_args(argv)
    if args.embedded:
        print(json.dumps(embedded_rows(args.embedded, args.n), indent=1))
        return
    device = torch.device("cpu" if args.tiny and args.device == "cuda" else args.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    from engine.tasks import get_task
    warm_up(device)
    t0 = time.perf_counter()
    adapter = llada_adapter(TINY if args.tiny else LLADA_8B, device, dtype)
    problems = [p.prompt for p in get_task("arith").problems("test", 12, seed=0)]
    out = dict(device=str(device), gpu=torch.cuda.get_device_name() if device.type == "cuda" else None,
               torch=torch.__version__, dtype=str(dtype), params=sum(p.numel() for p in adapter.model.parameters()),
               build_s=round(time.perf_counter() - t0, 1), errors={})
    for name, fn in sections(adapter, args, problems).items():
        if args.only and name not in args.only.split(","):
            continue
        t0 = time.perf_counter()
        adapter.__dict__.pop("_static", None)        # each section captures its own graphs (MAX_GRAPHS)
        try:
            out[name] = fn()
        except Exception as e:              # a measurement that breaks must not lose the others' figures
            out["errors"][name] = f"{type(e).__name__}: {e}"[:2000]
            progress("error", {name: out["errors"][name]})
        out.setdefault("seconds", {})[name] = round(time.perf_counter() - t0, 1)
        if args.out:
            provenance.write(args.out, out)
    print(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
