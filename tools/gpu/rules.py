"""Every decoder on the GPU: at batch 1 against the bare graph replay of the buckets it used, and in one mixed round
of eight different decoders, each with the host synchronisations it caused counted by CUDA itself.

The full-attention rules run on the LLaDA layout; the block-causal ones (S2D2, SimSD, TSPD + CE, the sub-block
rule, the revising rules) on the same weights read block-causally (SimSD's drafter: two random layers of the same
width; TSPD + CE with its heuristic controller, since no trained controller exists for random weights); the
uniform canvas on its embedded model.
"""

from __future__ import annotations

import statistics
import warnings

import torch

from tools.bench.clock import median_ms, now
from tools.bench.report import progress
from tools.bench.settings import under
from tools.gpu.common import STATIC, block_causal, shaped_adapter

FULL = ["ar", "llada:block_size=32,steps=32", "threshold:tau=0.9,block_size=32", "eb:block_size=32",
        "remdm:block_size=32,steps=32", "prophet:block_size=32", "klass:block_size=32", "credit:block_size=32",
        "dream:steps=32"]
BLOCK = ["ar", "threshold:tau=0.9,block_size=32", "s2d2:router=always,block_size=32", "s2d2:block_size=32",
         "simsd:block_size=32,drafter=unmask-tasks-drafter", "tspd:block_size=32,controller=heuristic",
         "subblock:block_size=32,sub_block=8", "edit:block_size=32", "wino:block_size=32"]
MIXED = BLOCK[1:]                 # eight different block-causal rules in one round
UNIFORM = "uniform"


class Buckets:
    """The static path's buckets a decode used, and how often (``StaticPath._bucket`` watched)."""

    def __enter__(self):
        from engine.models.static import StaticPath
        self.used: dict[int, list] = {}
        self.cls, self.orig = StaticPath, StaticPath._bucket

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
            total += count * median_ms(fn, reps)
            n += count
        return total / max(n, 1)


class Syncs:
    """Host synchronisations CUDA reports (``torch.cuda.set_sync_debug_mode('warn')``) inside the block; None on
    a CPU, where nothing waits."""

    def __enter__(self):
        self.count = None
        if torch.cuda.is_available():
            self.caught = warnings.catch_warnings(record=True)
            self.log = self.caught.__enter__()
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
        return self

    def __exit__(self, *exc):
        if torch.cuda.is_available():
            torch.cuda.set_sync_debug_mode("default")
            self.caught.__exit__(*exc)
            self.count = sum("synchroniz" in str(w.message) for w in self.log)


def drafter_of(adapter, shape: dict):
    """SimSD's drafter: two random layers of the target's width and vocabulary, block-causal."""
    return block_causal(shaped_adapter(dict(shape, layers=2), adapter.device, adapter.dtype, name="random-drafter"))


def one(adapter, prompt: str, spec: str, gen: int, reps: int, load=None) -> dict:
    """One decoder at batch 1 on the static path: a warm-up decode, then the measured one."""
    from engine.decoders import build_decoder, parse_spec
    from engine.runtime.device import READBACK
    from engine.runtime.loop import Generation
    name, params = parse_spec(spec)
    params = {"gen_length": gen, **params} if name != "uniform" else params
    pol = lambda: build_decoder(name, stop_at_eos=False, **params)                               # noqa: E731
    under(STATIC, lambda: Generation(adapter, prompt, pol(), load=load).run())
    with Buckets() as used, Syncs() as syncs:
        before, t0 = dict(READBACK), now()
        tr = under(STATIC, lambda: Generation(adapter, prompt, pol(), load=load).run())
        wall = now() - t0
    nfe = tr.meta.nfe
    row = dict(spec=spec, model=adapter.name, nfe=nfe, tokens=tr.meta.generated_tokens,
               tokens_per_s=tr.meta.generated_tokens / wall, ms_per_forward=1e3 * wall / nfe,
               readback_bytes_per_forward=(READBACK["bytes"] - before.get("bytes", 0)) / nfe,
               readback_copies_per_forward=(READBACK["copies"] - before.get("copies", 0)) / nfe,
               syncs_per_forward=None if syncs.count is None else syncs.count / nfe, path=tr.meta.forward_path)
    if used.used:
        row["replay_ms"] = used.replay_ms(reps)
        row["ratio"] = row["ms_per_forward"] / row["replay_ms"]
    if name == "s2d2":
        walls = {k: [r.wall_ms for r in tr.records if r.kind == k] for k in ("draft", "verify")}
        if all(walls.values()):
            row["draft_ms"], row["verify_ms"] = (statistics.median(walls[k]) for k in ("draft", "verify"))
            row["verify_over_draft"] = row["verify_ms"] / row["draft_ms"]
    progress("decoder", {k: row.get(k) for k in ("spec", "ms_per_forward", "ratio", "syncs_per_forward")})
    return row


def mixed_round(adapter, prompts: list[str], gen: int, load=None) -> dict:
    """``MIXED``'s eight rules submitted together (one round holds them all) on the static path, after a warm-up
    run: ms per round, host syncs per round, and how many decodes wrote the tokens they write alone."""
    from engine.decoders import build_decoder, parse_spec
    from engine.runtime.jobs import run_batched
    from engine.runtime.loop import Generation

    def job(spec, prompt):
        name, params = parse_spec(spec)
        return lambda: Generation(adapter, prompt, build_decoder(name, gen_length=gen, stop_at_eos=False, **params),
                                  load=load).requests()
    jobs = [job(s, p) for s, p in zip(MIXED, prompts)]
    alone = [under(STATIC, lambda j=j: run_batched([j], 1)[0]).meta.token_ids for j in jobs]
    under(STATIC, run_batched, jobs, len(jobs))                                  # warm-up: every bucket captured
    with Syncs() as syncs:
        t0 = now()
        traces = under(STATIC, run_batched, jobs, len(jobs))
        wall = now() - t0
    rounds = max(t.meta.nfe for t in traces)
    out = dict(specs=MIXED, rounds=rounds, ms_per_round=1e3 * wall / rounds,
               syncs_per_round=None if syncs.count is None else syncs.count / rounds,
               same_as_alone=sum(t.meta.token_ids == a for t, a in zip(traces, alone)), decodes=len(jobs))
    progress("mixed", out)
    return out


def same_seed(adapter, prompt: str, gen: int) -> dict:
    """A sampled decode (T = 1) twice with one seed on this device: the same tokens (what a seed reproduces)."""
    from engine.decoders import build_decoder
    from engine.runtime.loop import Generation
    runs = [under(STATIC, lambda: Generation(adapter, prompt, build_decoder(
        "s2d2", block_size=32, temperature=1.0, seed=7, gen_length=gen)).run()).meta.token_ids for _ in range(2)]
    return dict(spec="s2d2:block_size=32,temperature=1,seed=7", same_tokens=runs[0] == runs[1])


def every_decoder(full, shape: dict, prompt: str, gen: int, reps: int, only=None) -> tuple[list, dict]:
    """``one`` for every decoder (``only``: decoder names to keep): rows, and each failure's one line (a decoder
    that breaks must not lose the others' figures)."""
    from engine.models.model import load_model
    block = block_causal(full)
    drafter = drafter_of(full, shape)
    jobs = [(full, s, None) for s in FULL] + [(block, s, (lambda _n: drafter)) for s in BLOCK]
    if only is None or UNIFORM in only:
        jobs.append((load_model("unmask-uniform-small", device=str(full.device)), UNIFORM, None))
    rows, errors = [], {}
    for adapter, spec, load in jobs:
        if only is not None and spec.split(":")[0] not in only:
            continue
        adapter.__dict__.pop("_static", None)           # each decoder captures its own graphs (MAX_GRAPHS)
        try:
            rows.append(one(adapter, prompt, spec, gen, reps, load))
        except Exception as e:
            errors[f"{adapter.name}/{spec}"] = f"{type(e).__name__}: {e}"[:500]
            progress("error", errors)
    return rows, errors
