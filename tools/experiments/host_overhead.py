"""The host's work per forward: Unmask's engine against LLaDA's and Fast-dLLM's released loops, with a stand-in
model whose forward costs nothing (a benchmark, not a test: ratios in one process, on one machine).

    python -m tools.experiments.host_overhead                                   # Unmask alone (a few minutes)
    python -m tools.experiments.host_overhead --llada DIR --fast-dllm DIR       # and the released loops
    python -m tools.experiments.host_overhead ... --device cuda --forward       # on a GPU, beside an 8B forward

``--llada`` / ``--fast-dllm``: a checkout (or a bare git mirror) of github.com/ML-GSAI/LLaDA and NVlabs/Fast-dLLM;
their ``generate.py`` and ``llada/generate.py`` are copied into a temporary folder and imported from there (never
committed; Fast-dLLM's import of its own model class is dropped: the stand-in replaces it).

The stand-in (``StandIn``) returns, for its k-th call, precomputed logits (B, Q, V): Gaussian noise with one peak
per row at a token of the real vocabulary, of a height that gives a spread of confidences, so the decoders commit
real tokens at a realistic pace. It is a full-attention model without a cache, as LLaDA's ``generate`` runs it
(the whole canvas every forward); every forward sees the same logits (row i of the canvas gets row i), so at
batch 1 the tokens of the same rule must agree. Per forward: total time, time inside the model (the stand-in's own
call), and host time (the rest: the decoder's rule, statistics, records, copies), split for Unmask into its token
statistics (the kernels over (rows, V), which a GPU runs on the device) and the rest of the host (Python and
dispatch, which a GPU's host pays too). Greedy, no early stop (``stop_at_eos=0``), so every loop makes the same
number of forwards (``llada``: one token per step; ``threshold``: τ = 0.9). ``--vocabs real`` runs the model itself
in every loop, full attention over the whole canvas without a cache (``Canvas``: the released loops'
``model(x).logits``), so the forwards are equal and the difference is the host's.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import torch

from tools.bench.clock import now
from tools.gpu.common import kernel_ms, warm_up

LLADA_V = 126_464            # LLaDA-8B's vocabulary
GEN = 64                     # generated slots per problem
LLADA_8B = dict(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=32,
                intermediate_size=12288, vocab_size=LLADA_V)                                # LLaDA-8B's shape


class StandIn(torch.nn.Module):
    """A model whose forward costs nothing: call k returns ``logits[k % n][:Q]`` expanded to (B, Q, V) (a view)."""

    def __init__(self, config, vocab: int, real_vocab: int, rows: int, mask_id: int, n: int = 1, seed: int = 0,
                 device=torch.device("cpu")):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        logits = torch.randn(n, rows, vocab, generator=g)                         # (n, rows, V)
        peak = torch.randint(0, real_vocab, (n, rows), generator=g)
        peak[peak == mask_id] = 0
        height = 0.5 + 5.0 * torch.rand(n, rows, generator=g)     # p(peak) from 0.5 to 0.99 (noise: e^0.5 a token)
        logits.scatter_(2, peak[..., None], height[..., None] + torch.log(torch.tensor(float(vocab))))
        self.logits, self.calls, self.seconds = logits.to(device), 0, 0.0
        self.config = copy.deepcopy(config)
        self.config.vocab_size = vocab
        self.config._attn_implementation = "eager"          # no ragged hook: the stand-in has no attention
        self.device = torch.device(device)

    def forward(self, input_ids=None, **_):
        t0 = time.perf_counter()
        B, Q = input_ids.shape
        out = self.logits[self.calls % len(self.logits), :Q].expand(B, Q, -1)
        self.calls += 1
        self.seconds += time.perf_counter() - t0
        return SimpleNamespace(logits=out)


def stand_in_adapter(real, vocab: int, rows: int):
    """The real adapter's tokenizer and settings around a ``StandIn`` of ``vocab`` logits, as a full-attention model."""
    model = StandIn(real.model.config, vocab, real.vocab_size, rows, real.mask_token_id, device=real.device)
    return dataclasses.replace(real, model=model, attention="full", block_size=None)


def problems(n: int):
    from engine.tasks import get_task
    return get_task("arith").problems("test", n, seed=0)


def unmask(adapter, spec: str, n: int, batch: int, counter=None) -> dict:
    """The engine's decodes of n problems, ``batch`` at a time: seconds per round (a batched forward), inside the
    model, and inside the round's token statistics (the kernels over (rows, V), which a GPU runs on the device)."""
    from engine.harness.bench import run_bench
    from engine.runtime import scheduler
    from engine.runtime.jobs import configure, engine_loop
    m, stats, spent = counter or adapter.model, scheduler.token_stats_batch, [0.0]     # m: calls and seconds

    def timed(*args, **kwargs):
        t0 = now()
        out = stats(*args, **kwargs)
        spent[0] += now() - t0
        return out
    run_bench(adapter, "arith", 1, [spec], batch=1, warmup=True)            # first-call allocations, untimed
    m.calls, m.seconds = 0, 0.0
    loop = engine_loop()
    before = loop.max_running, loop.round_tokens         # as the CLI's --batch: the running set is the batch
    configure(max_running=batch, round_tokens=1 << 20)
    scheduler.token_stats_batch = timed
    try:
        t0 = now()
        (row,) = run_bench(adapter, "arith", n, [spec], batch=batch, warmup=False)
        wall = now() - t0
    finally:
        scheduler.token_stats_batch = stats
        configure(*before)
    return dict(per_forward(wall, m.seconds, m.calls, row["nfe"] * n), stats_ms=1e3 * spent[0] / m.calls,
                rest_ms=1e3 * (wall - m.seconds - spent[0]) / m.calls)


def per_forward(wall: float, inside: float, calls: int, forwards: float) -> dict:
    return dict(total_ms=1e3 * wall / calls, model_ms=1e3 * inside / calls, host_ms=1e3 * (wall - inside) / calls,
                rounds=calls, forwards=int(forwards))


class Timed:
    """Seconds and calls inside a real model's forward (hooks, waiting for the GPU's work), kept where ``StandIn``
    keeps its own."""

    def __init__(self, model: torch.nn.Module):
        self.model, self.calls, self.seconds, self._t0 = model, 0, 0.0, 0.0
        model.register_forward_pre_hook(lambda *_: setattr(self, "_t0", now()))
        model.register_forward_hook(lambda *_: self._stop())

    def _stop(self) -> None:
        self.calls += 1
        self.seconds += now() - self._t0


class Canvas(torch.nn.Module):
    """The real model as the released loops call it, ``model(x).logits`` over the whole canvas: through the
    adapter, with full attention (a mask of ones), as Unmask's full-attention runner runs it."""

    def __init__(self, adapter):
        super().__init__()
        self.adapter, self.device = adapter, adapter.device

    def forward(self, input_ids=None, **_):
        B, n = input_ids.shape
        pos = torch.arange(n, device=input_ids.device).expand(B, n)
        return SimpleNamespace(logits=self.adapter.run(input_ids, torch.ones(B, n, n, dtype=torch.bool), pos))


def load_reference(source: str, path: str, name: str):
    """A released loop, copied from its checkout or git mirror into a temporary folder and imported from there."""
    src = Path(source)
    text = (src / path).read_text() if (src / path).is_file() else subprocess.run(
        ["git", f"--git-dir={src}", "show", f"HEAD:{path}"], capture_output=True, text=True, check=True).stdout
    text = "\n".join(line for line in text.splitlines() if not line.startswith("from model."))
    folder = Path(tempfile.mkdtemp(prefix="unmask-reference-"))
    (folder / f"{name}.py").write_text(text)
    spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reference(adapter, generate, kwargs: dict, n: int, model=None, counter=None) -> tuple[dict, list]:
    """A released loop over the same n problems, one at a time: seconds per forward and the generated ids.
    ``model``: what the loop calls (default the adapter's); ``counter``: where its calls and seconds are kept."""
    model = model or adapter.model
    m, outs = counter or model, []
    m.calls, m.seconds = 0, 0.0
    t0 = now()
    for p in problems(n):
        ids = torch.tensor([adapter.encode_prompt(p.prompt)], device=adapter.device)
        x = generate(model, ids, gen_length=GEN, mask_id=adapter.mask_token_id, **kwargs)
        x = x[0] if isinstance(x, tuple) else x
        gen = x[0, ids.shape[1]:].tolist()
        stop = next((i + 1 for i, t in enumerate(gen) if t in adapter.stop_ids), len(gen))
        outs.append(gen[:stop])                          # as Unmask reports them: up to the first stop token
    wall = now() - t0
    return per_forward(wall, m.seconds, m.calls, m.calls), outs


def unmask_tokens(adapter, spec: str, n: int) -> list:
    from engine.decoders import build_decoder, parse_spec
    from engine.runtime.loop import Generation
    name, params = parse_spec(spec)
    return [Generation(adapter, p.prompt, build_decoder(name, **params)).run().meta.token_ids[:GEN]
            for p in problems(n)]


def rows(real, vocab: int | None, block: int, n: int, refs: dict, timed: Timed | None = None) -> list[dict]:
    """Unmask's ``llada`` and ``threshold`` at batch 1 and 12 and the released loops, on the stand-in of ``vocab``
    logits, or (``vocab`` None) on the real model with full attention over the whole canvas in every loop."""
    if vocab is None:
        adapter, vocab, where = dataclasses.replace(real, attention="full", block_size=None), real.vocab_size, "model"
        model = Canvas(adapter)
    else:
        canvas = max(len(real.encode_prompt(p.prompt)) for p in problems(n)) + GEN
        adapter, model, where = stand_in_adapter(real, vocab, rows=max(n, 12) * canvas), None, "stand-in"   # batch 12
    specs = {"llada": f"llada:block_size={block},steps={block},gen_length={GEN},stop_at_eos=0",
             "threshold": f"threshold:tau=0.9,block_size={block},gen_length={GEN},stop_at_eos=0"}
    out = []
    for name, spec in specs.items():
        for batch in (1, 12):
            out.append(dict(loop=f"Unmask {name}", on=where, vocab=vocab, block=block, batch=batch,
                            **unmask(adapter, spec, n, batch, timed)))
        if name in refs:
            generate, kwargs = refs[name]
            r, ids = reference(adapter, generate, dict(kwargs, block_length=block), n, model, timed)
            same = sum(a == b for a, b in zip(ids, unmask_tokens(adapter, spec, n)))
            out.append(dict(loop=f"released {name}", on=where, vocab=vocab, block=block, batch=1,
                            same=f"{same}/{n}", **r))
    return out


def forward_rows(device, reps: int = 20, shape: dict = LLADA_8B) -> list[dict]:
    """Milliseconds per forward of a random model of LLaDA-8B's shape in bf16 through Unmask's adapter (full
    attention, a bool mask of ones), batch 1 and 12, over 32 rows (a block: a lower bound of a block's forward over
    a prefix cache) and 128 (a whole canvas, as the released loops run it): the device's side of the host's table."""
    from transformers import LlamaConfig, LlamaForCausalLM
    from engine.models.model import ModelAdapter
    cfg = LlamaConfig(**shape, max_position_embeddings=4096, tie_word_embeddings=False)
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16).eval()
    adapter = ModelAdapter(model=model, tokenizer=None, name="llada-8b-shaped", model_type="llada", mask_token_id=0,
                           logit_shift=0, attention="full", block_size=None, stop_ids=(), attn_impl="sdpa",
                           device=torch.device(device), dtype=torch.bfloat16)
    out = []
    for batch in (1, 12):
        for n in (32, 128):
            ids, pos = torch.randint(0, shape["vocab_size"], (batch, n)), torch.arange(n).expand(batch, n)
            mask = torch.ones(batch, n, n, dtype=torch.bool)
            times = []
            for _ in range(reps + 3):                                                      # three warm-ups
                t0 = now()
                adapter.run(ids, mask, pos)
                times.append(now() - t0)
            busy = kernel_ms(lambda: adapter.run(ids, mask, pos)) if adapter.device.type == "cuda" else None
            out.append(dict(batch=batch, rows=n, ms=1e3 * statistics.median(times[3:]), busy_ms=busy,
                            params=sum(p.numel() for p in model.parameters())))
    return out


def table(rs: list[dict]) -> str:
    head = ("| loop | on | V | block | batch | per round: total (ms) | in the model | host | of which statistics | "
            "rest of the host | rounds | tokens = Unmask's |\n|---|---|---|---|---|---|---|---|---|---|---|---|")
    f = lambda r, k: f"{r[k]:.2f}" if k in r else ""                                                      # noqa: E731
    return "\n".join([head] + [f"| {r['loop']} | {r['on']} | {r['vocab']:,} | {r['block']} | {r['batch']} | "
                               f"{f(r, 'total_ms')} | {r['model_ms']:.3f} | {f(r, 'host_ms')} | {f(r, 'stats_ms')} | "
                               f"{f(r, 'rest_ms')} | {r['rounds']} | {r.get('same', '')} |" for r in rs])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="unmask-tasks-small", help="whose tokenizer, config and vocabulary")
    ap.add_argument("--n", type=int, default=12, help="problems (one batch of twelve at batch 12)")
    ap.add_argument("--blocks", default="32,8")
    ap.add_argument("--llada", default="", help="LLaDA's checkout or git mirror (its generate.py)")
    ap.add_argument("--fast-dllm", default="", help="Fast-dLLM's checkout or git mirror (its llada/generate.py)")
    ap.add_argument("--vocabs", default=f"{LLADA_V},model,real", help="stand-in vocabulary sizes (\"model\": the "
                    "model's own); \"real\": the model itself, full attention over the whole canvas in every loop")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu", help="where the models run (cuda: the statistics run there too)")
    ap.add_argument("--forward", action="store_true", help="also time a forward of a random LLaDA-8B-shaped model")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    from engine.models.model import load_model
    warm_up(args.device)
    if args.forward:
        for r in forward_rows(args.device):
            busy = f" (the GPU's kernels: {r['busy_ms']:.2f} ms)" if r["busy_ms"] is not None else ""
            print(f"LLaDA-8B-shaped forward ({r['params'] / 1e9:.2f}B, bf16, {args.device}): batch {r['batch']}, "
                  f"{r['rows']} rows: {r['ms']:.2f} ms{busy}", flush=True)
    real = load_model(args.model, device=args.device)
    refs = {}
    if args.llada:
        refs["llada"] = (load_reference(args.llada, "generate.py", "llada_generate").generate, dict(steps=GEN))
    if args.fast_dllm:
        refs["threshold"] = (load_reference(args.fast_dllm, "llada/generate.py", "fastdllm_generate").generate,
                             dict(steps=GEN, threshold=0.9))
    out, timed = [], Timed(real.model)
    vocabs = [v for v in args.vocabs.split(",") if v]                       # "": none (--forward alone)
    for vocab in (real.vocab_size if v == "model" else None if v == "real" else int(v) for v in vocabs):
        for block in (int(b) for b in args.blocks.split(",")):
            out += rows(real, vocab, block, args.n, refs, timed if vocab is None else None)
            print(table(out[-6:]), flush=True, file=sys.stderr)
    print(table(out))
    summary(out)


def summary(out: list[dict]) -> None:
    """The issue's ratios: each released loop's time per round over Unmask's (batch 1, the same setting), and a
    round's host time at batch 12 over batch 1 (all of it, and the rest besides the statistics)."""
    same = lambda a, b: (a["on"], a["vocab"], a["block"]) == (b["on"], b["vocab"], b["block"])        # noqa: E731
    for a in out:
        for b in out:
            if a["loop"].startswith("released") and b["batch"] == 1 and b["loop"] == "Unmask " + \
                    a["loop"].split()[-1] and same(a, b):
                print(f"{a['loop']} / Unmask on the {a['on']} at V={a['vocab']}, block {a['block']}: "
                      f"{a['total_ms'] / b['total_ms']:.2f}x")
    pairs = [(a, b) for a in out for b in out if a["loop"] == b["loop"] and a["batch"] == 1 and b["batch"] == 12
             and same(a, b)]
    for k in ("host_ms", "rest_ms"):
        if pairs:
            print(f"median {k} at batch 12 / batch 1:", round(statistics.median(b[k] / a[k] for a, b in pairs), 2))


if __name__ == "__main__":
    main()
