"""The GPU check of every decoder: one prepared call on a CUDA machine, as one JSON (issue 66).

    python -m tools.experiments.gpu_rules --device cuda --out results/gpu/rules.json    # about 3 minutes on an H200
    python -m tools.experiments.gpu_rules --tiny                                       # a CPU smoke run (the tests)

On random weights of LLaDA-8B's shape (``gpu_static.llada_adapter``: bf16, vocabulary 126 464), each of the sixteen
decoders at batch 1 on the static path with CUDA graphs: the full-attention rules on the LLaDA layout, the
block-causal ones (S2D2, SimSD, TSPD + CE, the sub-block rule, the revising rules) on the same weights read
block-causally (an SDAR-like layout; SimSD's drafter: two random layers of the same width, which the loader gives
whatever name the spec's ``drafter`` carries; TSPD + CE with its heuristic controller, since no trained controller
exists for random weights), the uniform canvas on
its embedded model (no canvas model of that shape exists here). Per decoder, after a warm-up decode:

* ``ms_per_forward``: the decode's wall time over its forwards (the host's rule work included);
* ``replay_ms``: the bare graph replay of the buckets the decode used, weighted by their use (on a CPU: the static
  path's eager call), and ``ratio`` = the first over the second (the target: ≤ 1.25);
* ``readback_bytes_per_forward``: what crossed from the device per forward (``engine.runtime.device.READBACK``);
* ``tokens_per_s``; for S2D2, the median wall of its draft and verify records (``verify_over_draft``).

Then (``cached``) cached decodes sharing rounds at batch 1, 4 and 12 (the exact block cache; Fast-dLLM's dual
cache), and (``seed``) a sampled S2D2 decode twice with one seed: the same tokens on the same device.

``--runs 2`` (the default) runs everything twice: both runs are reported, since their spread is the figures'
honesty. The JSON carries the commit, the arguments and the library versions.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from tools.experiments.gpu_static import LLADA_8B, STATIC, TINY, llada_adapter, progress, timed
from tools.experiments.host_overhead import now, warm_up
from tools import provenance

FULL = ["ar", "llada:block_size=32,steps=32", "threshold:tau=0.9,block_size=32", "eb:block_size=32",
        "remdm:block_size=32,steps=32", "prophet:block_size=32", "klass:block_size=32", "credit:block_size=32",
        "dream:steps=32"]
BLOCK = ["ar", "threshold:tau=0.9,block_size=32", "s2d2:router=always,block_size=32", "s2d2:block_size=32",
         "simsd:block_size=32,drafter=unmask-tasks-drafter", "tspd:block_size=32,controller=heuristic", "subblock:block_size=32,sub_block=8",
         "edit:block_size=32", "wino:block_size=32"]
UNIFORM = "uniform"


def block_causal(adapter):
    """The same weights read block-causally (SDAR's layout): the block-causal rules' model."""
    import dataclasses
    return dataclasses.replace(adapter, attention="block_causal", name=adapter.name + " (block-causal)")


def drafter_of(adapter, device, dtype, tiny: bool):
    """SimSD's drafter: two random layers of the target's width and vocabulary, block-causal."""
    shape = dict(TINY if tiny else LLADA_8B, num_hidden_layers=2)
    return block_causal(llada_adapter(shape, device, dtype))


class Buckets:
    """The static path's buckets a decode used, and how often (``StaticPath._bucket`` watched)."""

    def __init__(self):
        from engine.models.static import StaticPath
        self.used: dict[int, list] = {}
        self.cls, self.orig = StaticPath, StaticPath._bucket

    def __enter__(self):
        def watched(path, *args):
            bk = self.orig(path, *args)
            self.used.setdefault(id(bk), [bk, path, 0])[2] += 1
            return bk
        self.cls._bucket = watched
        return self

    def __exit__(self, *exc):
        self.cls._bucket = self.orig

    def replay_ms(self, reps: int) -> float:
        """The bare replay (else the static call) of each bucket, weighted by its use, median of ``reps``."""
        total, n = 0.0, 0
        for bk, path, count in self.used.values():
            fn = bk.graph.replay if bk.graph is not None else (lambda b=bk, p=path: p._call(b))
            total += count * timed(fn, reps)
            n += count
        return total / max(n, 1)


def one(adapter, prompt: str, spec: str, gen: int, reps: int, load=None) -> dict:
    """One decoder at batch 1 on the static path: a warm-up decode, then the measured one."""
    from engine.decoders import build_decoder, parse_spec
    from engine.runtime.device import READBACK
    from engine.runtime.loop import Generation
    name, params = parse_spec(spec)
    params = {"gen_length": gen, **params} if name != "uniform" else params
    pol = lambda: build_decoder(name, stop_at_eos=False, **params)                               # noqa: E731
    STATIC(lambda: Generation(adapter, prompt, pol(), load=load).run())
    with Buckets() as used:
        before, t0 = dict(READBACK), now()
        tr = STATIC(lambda: Generation(adapter, prompt, pol(), load=load).run())
        wall = now() - t0
    nfe = tr.meta.nfe
    row = dict(spec=spec, model=adapter.name, nfe=nfe, tokens=tr.meta.generated_tokens,
               tokens_per_s=tr.meta.generated_tokens / wall, ms_per_forward=1e3 * wall / nfe,
               readback_bytes_per_forward=(READBACK["bytes"] - before.get("bytes", 0)) / nfe,
               readback_copies_per_forward=(READBACK["copies"] - before.get("copies", 0)) / nfe,
               path=tr.meta.forward_path)
    if used.used:
        row["replay_ms"] = used.replay_ms(reps)
        row["ratio"] = row["ms_per_forward"] / row["replay_ms"]
    if name == "s2d2":
        walls = {k: [r.wall_ms for r in tr.records if r.kind == k] for k in ("draft", "verify")}
        if all(walls.values()):
            row["draft_ms"], row["verify_ms"] = (statistics.median(walls[k]) for k in ("draft", "verify"))
            row["verify_over_draft"] = row["verify_ms"] / row["draft_ms"]
    progress("decoder", row)
    return row


def cached_rounds(full, block, problems: list[str], gen: int) -> list[dict]:
    """Cached decodes sharing rounds at batch 1, 4 and 12: the exact block cache (block-causal) and Fast-dLLM's
    dual cache (full attention), tokens/s and ms per round, on the static path."""
    from engine.decoders import build_decoder, parse_spec
    from engine.runtime.jobs import run_batched
    from engine.runtime.loop import Generation
    rows = []
    for adapter, spec in ((block, "threshold:tau=0.9,block_size=32"),
                          (full, "llada:block_size=32,steps=32,kv_cache=dual")):
        name, params = parse_spec(spec)
        for batch in (1, 4, 12):
            jobs = [(lambda p=p: Generation(adapter, p, build_decoder(name, gen_length=gen, stop_at_eos=False,
                                                                      **params)).requests()) for p in problems[:batch]]
            STATIC(run_batched, jobs, batch)                                           # warm-up (captures)
            t0 = now()
            traces = STATIC(run_batched, jobs, batch)
            wall = now() - t0
            rounds = max(t.meta.nfe for t in traces)
            rows.append(dict(spec=spec, model=adapter.name, batch=batch, tokens_per_s=sum(
                t.meta.generated_tokens for t in traces) / wall, ms_per_round=1e3 * wall / rounds,
                path=traces[0].meta.forward_path))
            progress("cached", rows[-1])
    return rows


def same_seed(adapter, prompt: str, gen: int) -> dict:
    """A sampled decode (T = 1) twice with one seed on this device: the same tokens (what a seed reproduces)."""
    from engine.decoders import build_decoder
    from engine.runtime.loop import Generation
    runs = [STATIC(lambda: Generation(adapter, prompt, build_decoder(
        "s2d2", block_size=32, temperature=1.0, seed=7, gen_length=gen)).run()).meta.token_ids for _ in range(2)]
    return dict(spec="s2d2:block_size=32,temperature=1,seed=7", same_tokens=runs[0] == runs[1])


def run_all(args, device, dtype, prompt: str) -> list[dict]:
    from engine.models.model import load_model
    full = llada_adapter(TINY if args.tiny else LLADA_8B, device, dtype)
    block = block_causal(full)
    drafter = drafter_of(full, device, dtype, args.tiny)
    rows, errors = [], {}
    only = set(args.only.split(",")) if args.only else None
    jobs = [(full, s, None) for s in FULL] + [(block, s, (lambda _n: drafter)) for s in BLOCK]
    if only is None or UNIFORM in only:
        jobs.append((load_model("unmask-uniform-small", device=str(device)), UNIFORM, None))
    jobs = [j for j in jobs if only is None or j[1].split(":")[0] in only]
    for adapter, spec, load in jobs:
        adapter.__dict__.pop("_static", None)           # each decoder captures its own graphs (MAX_GRAPHS)
        try:
            rows.append(one(adapter, prompt, spec, args.gen, args.reps, load))
        except Exception as e:          # a decoder that breaks must not lose the others' figures
            errors[f"{adapter.name}/{spec}"] = f"{type(e).__name__}: {e}"[:2000]
            progress("error", errors)
    if only is None:
        from engine.tasks import get_task
        problems = [p.prompt for p in get_task("arith").problems("test", 12, seed=0)]
        for key, fn in (("cached", lambda: cached_rounds(full, block, problems, args.gen)),
                        ("seed", lambda: same_seed(block, prompt, args.gen))):
            try:
                rows.append({key: fn()})
            except Exception as e:
                errors[key] = f"{type(e).__name__}: {e}"[:2000]
    return rows + ([{"errors": errors}] if errors else [])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="toy width, on the CPU unless --device says otherwise")
    ap.add_argument("--gen", type=int, default=64, help="slots per decode")
    ap.add_argument("--reps", type=int, default=15, help="replays per bucket (median)")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--commit", default="", help="the commit measured, where the copy has no .git")
    ap.add_argument("--only", default="", help="decoders to run, commas (default: all sixteen)")
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)
    device = torch.device("cpu" if args.tiny and args.device == "cuda" else args.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    from engine.tasks import get_task
    warm_up(device)
    prompt = get_task("arith").problems("test", 1, seed=0)[0].prompt
    out = dict(args=vars(args), device=str(device), dtype=str(dtype), runs=[])
    for _ in range(args.runs):
        t0 = time.perf_counter()
        out["runs"].append(dict(rows=run_all(args, device, dtype, prompt), seconds=round(time.perf_counter() - t0, 1)))
        if args.out:
            provenance.write(args.out, out, argv, commit=args.commit or None)
    print(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
