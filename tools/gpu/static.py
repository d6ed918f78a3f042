"""The static path on a GPU (engine/models/static.py), section by section, for a longer lease than the default check.

On the shaped model (``tools.gpu.common``), after the clocks are warmed:

* ``forward``: per forward at batch 1 and 12 over 32 and 128 rows: the adapter's eager call, the engine's static call
  (buffers filled, graph replayed, rows copied out), the bare model replayed from a CUDA graph, the GPU's kernel time
  over the static call and the weight-read bound (bytes / ``HBM_BYTES_PER_S``).
* ``threshold_batch1`` / ``llada_batch1``: static against eager, tokens compared; ``batch12``: one round of twelve;
  ``released``: LLaDA's and Fast-dLLM's released loops at equal NFE (``--refs``); ``graph_vs_eager``: graphs on
  and off over the same buffers (tokens equal, asserted); ``busy``: kernels' share of a decode's wall; ``caches``:
  Fast-dLLM's none / prefix / dual at an 8- and a 1 000-token prompt; ``s2d2``: draft and verify forwards.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import torch

from tools.bench.clock import median_ms, now
from tools.bench.report import progress
from tools.bench.settings import under
from tools.experiments.host_overhead import load_reference
from tools.gpu.common import EAGER, HBM_BYTES_PER_S, NO_GRAPHS, STATIC, block_causal, decode, kernel_ms


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
    ms = median_ms(g.replay, reps)
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
            static = under(STATIC, StaticPath.of, adapter)
            row = dict(batch=batch, rows=n, eager_ms=median_ms(lambda: adapter.run(ids, mask, pos), reps),
                       static_ms=median_ms(lambda: static.run(reqs), reps),
                       graph_ms=graph_ms(adapter, ids.to(dev), mask[:, None].to(dev), pos.to(dev), reps),
                       bound_ms=1e3 * weight_bytes / HBM_BYTES_PER_S, vocab=V)
            if dev.type == "cuda":
                row["kernel_ms"] = kernel_ms(lambda: static.run(reqs))
            out.append(row)
            progress("forward", row)
    return out


def pair(adapter, prompt, spec: str) -> dict:
    """One decode static (graphs) and eager (today's path): tokens/s of each and whether their tokens agree."""
    s, e = under(STATIC, decode, adapter, prompt, spec), under(EAGER, decode, adapter, prompt, spec)
    return dict(spec=spec, static=strip(s), eager=strip(e), speedup=s["tokens_per_s"] / e["tokens_per_s"],
                same_tokens=s["ids"] == e["ids"])


def strip(d: dict) -> dict:
    return {k: v for k, v in d.items() if k not in ("ids", "trace")}


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
        ours = [under(STATIC, decode, adapter, p, spec) for p in problems]
        eager = [under(EAGER, decode, adapter, p, spec)["ids"] for p in problems]
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
            model = [under(STATIC, decode, adapter, p, spec + ",precision=model")["ids"] for p in problems]
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
        traces, wall = under(env, go)
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
        rows = [under(STATIC, decode, adapter, ids, f"llada:block_size=32,steps={8 * gen // 32},gen_length={gen},"
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
    bc = block_causal(adapter, 32)
    out = []
    for use_cache in (1, 0):
        def go():
            pol = lambda: build_decoder("s2d2", router="always", block_size=32, gen_length=gen,  # noqa: E731
                                        use_cache=bool(use_cache), stop_at_eos=False)
            Generation(bc, prompt, pol()).run()
            return Generation(bc, prompt, pol()).run()
        tr = under(STATIC, go)
        kinds = {r.kind for r in tr.records}
        out.append(dict(use_cache=use_cache, nfe=tr.nfe, path=tr.meta.forward_path, ms={
            k: statistics.median(r.wall_ms for r in tr.records if r.kind == k) for k in kinds}))
        progress("s2d2", out[-1])
    return out


def busy_rows(adapter, prompt, spec: str) -> dict:
    """How busy the GPU is during a batch-1 decode on the static path: its kernels' time (torch's profiler, one
    decode) over the wall of the same decode unprofiled."""
    from torch.profiler import ProfilerActivity, profile
    row = under(STATIC, decode, adapter, prompt, spec)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        under(STATIC, decode, adapter, prompt, spec)        # its own warm-up decode and the timed one: two decodes
        torch.cuda.synchronize()
    kernels = sum(e.self_device_time_total for e in prof.key_averages()) / 1e3 / 2     # ms per decode
    wall = 1e3 * row["tokens"] / row["tokens_per_s"]
    out = dict(spec=spec, wall_ms=wall, kernel_ms=kernels, busy=kernels / wall, nfe=row["nfe"],
               ms_per_forward=row["ms_per_forward"], path=row["path"])
    progress("busy", out)
    return out


def graph_vs_eager(adapter, prompt, spec: str) -> dict:
    """The same decode with graphs and without (eager over the same static buffers): tokens must be equal."""
    g, e = under(STATIC, decode, adapter, prompt, spec), under(NO_GRAPHS, decode, adapter, prompt, spec)
    out = dict(spec=spec, graphs=strip(g), no_graphs=strip(e), same_tokens=g["ids"] == e["ids"])
    progress("graph_vs_eager", out)
    assert out["same_tokens"], f"a graph replay wrote other tokens than eager at the same shapes: {out}"
    return out


def sections(adapter, problems: list, gen: int, short: int, reps: int, refs: str = "") -> dict:
    """Each section's callable, in the order they run."""
    long_prompt = (adapter.encode_prompt(problems[0]) * 60)[:1000]
    spec = f"threshold:tau=0.9,block_size=32,gen_length={gen}"
    cuda = adapter.device.type == "cuda"
    return {
        "forward": lambda: forward_rows(adapter, reps),
        "graph_vs_eager": lambda: graph_vs_eager(adapter, problems[0], spec),
        "threshold_batch1": lambda: pair(adapter, problems[0], spec),
        "busy": lambda: busy_rows(adapter, problems[0], spec) if cuda else None,
        "llada_batch1": lambda: pair(adapter, problems[0], f"llada:block_size=32,steps=32,gen_length={short}"),
        "released": lambda: released_rows(adapter, Path(refs), problems[:4], short) if refs else None,
        "batch12": lambda: batch_rows(adapter, problems[:12], spec),
        "caches": lambda: cache_rows(adapter, {"8 tokens": adapter.encode_prompt(problems[0])[:8],
                                               "1000 tokens": long_prompt}, gen),
        "s2d2": lambda: s2d2_rows(adapter, problems[0], short),
    }
