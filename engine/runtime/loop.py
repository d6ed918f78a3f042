"""The shared block loop. A decoder is a policy over it; every model forward yields one ``StepRecord``.

``Generation`` walks the blocks (``decode``: a generator of its forward requests and records, which the engine
loop, ``engine.runtime.engine_loop``, drives with every other decode); a ``Policy`` drives each one through a ``BlockContext`` (commit, revise, emit a
record); the ``Runner`` (``engine/runtime/runner.py``) owns the canvas, the cache and the forwards."""

from __future__ import annotations

import time
from dataclasses import asdict, fields as dataclass_fields
from typing import Iterator

import numpy as np
import torch

from engine.catalogue.applies import check_applies, why_not  # noqa: F401  (why_not re-exported)
from engine.catalogue.cards import cards
from engine.runtime.device import host
from engine.runtime.resources import resolve
from engine.runtime.runner import Keeps, Runner, Tail  # noqa: F401  (re-exported: decoders import them from here)
from engine.runtime.runners import make_runner
from engine.errors import BudgetExceeded, ConfigError
from engine.models import compiled
from engine.runtime.sampling import TOP_K, TokenStats
from engine.records.trace_meta import TraceMeta
from engine.records.trace import GENERIC_FIELDS, Reason, Revision, StepRecord, Trace, payload_fields


def _host(x) -> np.ndarray:
    """A host tensor's values as numpy (its view: cheaper than ``np.asarray``), or a list's or an array's as int64."""
    return x.numpy() if isinstance(x, torch.Tensor) else np.asarray(x, dtype=np.int64)


class BlockContext:
    """What a policy sees of one block: its positions, the runner, and helpers to commit and emit records."""

    def __init__(self, runner: Runner, index: int, lo: int, hi: int):
        self.runner, self.index, self.lo, self.hi = runner, index, lo, hi
        self.L, self.step = hi - lo, 0
        self._snapshot()

    def _snapshot(self) -> None:
        self._before = self._ids.copy()        # the record's bookkeeping is numpy: cheaper than torch's dispatch
        self._reason = np.zeros(self.L, dtype=np.int8)
        self._revised = np.zeros(self.L, dtype=np.int8)
        self._prev: list = []          # this forward's edits to the previous block: (positions, old, new)
        self._fill: tuple | None = None  # this forward's writes after the block: (positions, tokens, reason)
        self._t0 = time.perf_counter()

    @property
    def tokens(self) -> torch.Tensor:
        return self.runner.tokens[self.lo:self.hi]

    @property
    def reasons(self) -> np.ndarray:
        """(L,) Reason codes of what this forward has committed so far (0 = not committed)."""
        return self._reason.copy()

    @property
    def masked(self) -> torch.Tensor:
        """(L,) bool: still-masked positions of the block (the prompt tail is never masked)."""
        return self.runner.masked(self.lo, self.hi)

    @property
    def masked_np(self) -> np.ndarray:
        """``masked`` as numpy, for rules written in numpy (``Runner.masked_np``)."""
        return self.runner.masked_np(self.lo, self.hi)

    @property
    def _ids(self) -> np.ndarray:
        """(L,) the block's tokens as a numpy view of the canvas (writes go to the canvas)."""
        return self.runner.tokens.numpy()[self.lo:self.hi]

    def draft(self, block_mask: torch.Tensor | None = None):
        """The block's draft forward: ``logits (L, V), stats = yield from ctx.draft()`` (the scheduler runs it
        with the round's other forwards and computes the statistics of all their rows at once)."""
        return (yield from self.runner.draft("draft", self.lo, self.hi, block_mask=block_mask))

    def commit(self, rel, tokens, reason: Reason | np.ndarray) -> None:
        """Write tokens at block-relative indices (host tensors or arrays); only masked slots (``revise`` changes
        a written one). ``reason``: one for all, or one per index. In numpy, through a view of the canvas."""
        rel = _host(rel).reshape(-1)
        if len(rel) == 0:
            return
        assert self.masked_np[rel].all(), "commit to an already decoded position"
        self._ids[rel] = _host(tokens).reshape(-1)
        self._reason[rel] = reason

    def fill_after(self, tokens: torch.Tensor, reason: Reason) -> None:
        """Write every [MASK] after the block with ``tokens`` (end − hi,), this forward's candidates there: a
        full-attention forward scores the whole canvas (``Runner.later``). The record carries what was written
        (``fill_positions``, ``fill_to``), so the blocks after it start full."""
        r = self.runner
        pos = self.hi + torch.nonzero(r.masked(self.hi, r.end))[:, 0]
        r.tokens[pos] = torch.as_tensor(tokens, dtype=torch.long)[pos - self.hi]
        self._fill = (pos.numpy().astype(np.int32), r.tokens[pos].numpy().astype(np.int32), int(reason))

    @property
    def written(self) -> torch.Tensor:
        """(L,) bool: slots of this block the decoder has written (decoded, not the prompt's tail)."""
        return ~self.masked & (torch.arange(self.lo, self.hi) >= self.runner.P)

    def revise(self, rel: torch.Tensor, tokens: torch.Tensor | None, why: Revision) -> None:
        """Rewrite written slots of the current block (``tokens``), or return them to [MASK] (``tokens`` None).
        Only a decoder that declares ``revises`` may; only the current block, so the exact block cache stays
        exact (a block's K/V are kept only once the next block starts)."""
        assert self.runner.revising, "this decoder does not revise: committed tokens are final"
        rel = torch.as_tensor(rel, dtype=torch.long).reshape(-1)
        if len(rel) == 0:
            return
        assert self.written[rel].all(), "revise only written slots of the current block"
        new = torch.full((len(rel),), self.runner.adapter.mask_token_id, dtype=torch.long) if tokens is None \
            else torch.as_tensor(tokens, dtype=torch.long).reshape(-1)
        self.runner.tokens[self.lo + rel] = new
        self._revised[rel.numpy()] = int(why)
        self._reason[rel.numpy()] = 0

    def rewrite(self, tokens: torch.Tensor, accepted: torch.Tensor) -> None:
        """Replace the whole block (a uniform-noise canvas, rewritten at every step); ``accepted`` (L,) bool marks
        the slots this step kept from the model (the rest are fresh noise). Nothing here is final until the
        block ends."""
        self.runner.tokens[self.lo:self.hi] = tokens
        self._reason[:] = 0
        self._reason[np.asarray(accepted)] = int(Reason.ENTROPY_BOUND)

    def revise_previous(self, positions: torch.Tensor, tokens: torch.Tensor) -> None:
        """Rewrite written tokens of the finished block just before this one (absolute positions), seen in this
        block's first forward, which recomputed that block. Its cached K/V are dropped, so the next forward
        recomputes it with the new tokens and the cache stays exact."""
        assert self.runner.revising, "this decoder does not revise: committed tokens are final"
        positions = torch.as_tensor(positions, dtype=torch.long).reshape(-1)
        if len(positions) == 0:
            return
        assert ((positions < self.lo) & (positions >= self.runner.P)).all(), "only written tokens before the block"
        old = self.runner.tokens[positions].clone()
        self.runner.tokens[positions] = torch.as_tensor(tokens, dtype=torch.long).reshape(-1)
        B = self.runner.cfg.block_size
        self.runner.uncache_from(int(positions.min()) // B * B)   # the block-causal cache holds whole blocks
        self._prev.append((positions.numpy(), old.numpy(), self.runner.tokens[positions].numpy()))

    def emit(self, kind: str, stats: TokenStats | None, own=None, **generic) -> StepRecord:
        """Close the current forward: build its record and start a new one. ``own``: the decoder's payload, an
        instance of the record dataclass its card declares for ``kind`` (checked by ``Generation._record``);
        ``generic``: fields of the contracts every decoder shares (``engine.records.trace.GENERIC``)."""
        assert set(generic) <= GENERIC_FIELDS, f"not generic record fields: {set(generic) - GENERIC_FIELDS}"
        extra = dict(generic)
        if own is not None:                        # stored flat (as saved); a shallow copy, arrays not copied
            extra.update({f.name: getattr(own, f.name) for f in dataclass_fields(own)})
        if self._revised.any():
            extra = dict(extra, revised=self._revised.copy(),
                         revised_from=np.where(self._revised > 0, self._before, -1).astype(np.int32))
        r = self.runner
        if r.kv_cache != "none" and r.fresh is not None:     # which K/V this forward computed, and its drift
            extra = dict(extra, kv_fresh=list(r.fresh), **({"drift": r.drift} if r.drift is not None else {}))
        state = r.generator.get_state().numpy()
        if not np.array_equal(state, r.rng_seen):           # this forward drew: keep where the stream stands
            r.rng_seen = state
            extra = dict(extra, rng_state=state.copy())
        if self._prev:
            pos, old, new = (np.concatenate(c).astype(np.int32) for c in zip(*self._prev))
            extra = dict(extra, prev_positions=pos, prev_from=old, prev_to=new)
        if self._fill is not None:
            extra = dict(extra, **dict(zip(("fill_positions", "fill_to", "fill_reason"), self._fill)))
        L = self.L
        if stats is not None and "topk_ids" not in extra:  # the candidates a person inspects per position
            ids, p = (stats.top_ids, stats.top_p) if stats.top_ids is not None else \
                (host(x) for x in reversed(torch.topk(stats.probs, min(TOP_K, stats.probs.shape[-1]), dim=-1)))
            extra = dict(extra, topk_ids=ids.numpy().astype(np.int32), topk_p=p.numpy().astype(np.float32))
        rec = StepRecord(
            block=self.index, step_in_block=self.step, kind=kind,
            positions=np.arange(self.lo, self.hi, dtype=np.int32),
            tokens_before=self._before.astype(np.int32),
            tokens_after=self._ids.astype(np.int32),
            committed=self._reason > 0, reason=self._reason.copy(),
            candidate=(stats.candidate.numpy().astype(np.int32) if stats else np.full(L, -1, np.int32)),
            confidence=(stats.confidence.numpy() if stats else np.full(L, np.nan, np.float32)),
            margin=(stats.margin.numpy() if stats else np.full(L, np.nan, np.float32)),
            entropy=(stats.entropy.numpy() if stats else np.full(L, np.nan, np.float32)),
            nfe=self.runner.total_nfe, wall_ms=(time.perf_counter() - self._t0) * 1e3, extra=extra)
        self.step += 1
        self._snapshot()
        return rec


class Policy(Keeps):
    """A decoder: ``run_block`` drives one block to completion, yielding a record per forward. Its config class
    is made from the parameter catalogue (``engine.catalogue.catalogue.config_class``). ``revises``: it may rewrite or
    re-mask tokens it wrote in the current block (``BlockContext.revise``); the others commit once."""
    name = "base"
    config_cls: type
    revises = False
    settles_per_block = False   # the block holds noise until it ends: [EOS] is looked for only then (uniform)

    def __init__(self, cfg):
        self.cfg = cfg                  # validated once, by engine.decoders.build_decoder (the only constructor)
        self.resources: dict = {}       # set by Generation (engine.runtime.resources)

    @property
    def prefix_causal(self) -> bool:
        """Whether committed K/V is computed token-causally instead of block-causally."""
        return False

    @property
    def keeps_block_kv(self) -> bool:
        """Whether the runner keeps each block forward's K/V of the block (Fast-dLLM v2's block cache)."""
        return False

    def settle(self, adapter):
        """Called once per generation, before the canvas is made: the config to decode with once the model has
        decided what it decides (``catalogue.settle``: the uniform decoder's canvas length and generation-config
        defaults, Dream's one block). Default: the validated config as it is."""
        return self.cfg

    def start(self, runner: Runner) -> None:
        """Called once per generation (routers with state across blocks reset here)."""

    def run_block(self, ctx: BlockContext) -> Iterator[StepRecord]:
        raise NotImplementedError

    def summary(self, runner: Runner):
        """The run's own totals: an instance of its card's ``summary_type`` (None: it has none)."""
        return None


class Generation:
    """One decode of one prompt. Iterate ``steps()`` for live records; ``trace()`` afterwards."""

    def __init__(self, adapter, prompt: str | list[int], policy: Policy, budget_s: float | None = None,
                 should_stop=None, load=None, resume=None):
        """budget_s: engine seconds this decode may take; should_stop(): whether the request was cancelled. Both
        are checked between forwards and raise ``BudgetExceeded`` with the partial trace. load(name): how the
        policy's resources (a drafter) are loaded (the caller's model cache; default: load them). resume: the state
        of a base run after one of its steps (``engine.runtime.branch``), decoded on from there."""
        self.adapter, self.policy, self.cfg = adapter, policy, policy.cfg
        self.budget_s, self.should_stop = budget_s, should_stop
        self.prompt_text = prompt if isinstance(prompt, str) else adapter.decode(prompt)
        self.prompt_ids = adapter.encode_prompt(prompt) if isinstance(prompt, str) else list(prompt)
        max_pos = getattr(adapter.model.config, "max_position_embeddings", 1 << 30)
        if len(self.prompt_ids) + self.cfg.gen_length > max_pos:
            raise ConfigError(f"prompt ({len(self.prompt_ids)} tokens) + gen_length ({self.cfg.gen_length}) "
                              f"exceeds the model's {max_pos} positions")
        check_applies(policy.name, adapter)
        self.cfg = policy.cfg = policy.settle(adapter)
        self.runner = make_runner(adapter, self.prompt_ids, self.cfg, prefix_causal=policy.prefix_causal,
                                  revising=policy.revises, keep_block_kv=policy.keeps_block_kv)
        policy.attach(self.runner)                   # what the rule keeps is this decode's (the byte ledger)
        policy.resources = resolve(policy, adapter, load)
        self.resume = resume
        if resume is not None:
            if len(resume.canvas) != self.runner.end or resume.canvas[:self.runner.P] != self.prompt_ids:
                raise ConfigError("a branch keeps its base run's prompt and generation length")
            self.runner.tokens[:] = torch.tensor(resume.canvas, dtype=torch.long)
            if resume.rng_state is not None and self.cfg.seed == resume.seed:    # the run's stream, continued
                self.runner.generator.set_state(torch.from_numpy(resume.rng_state.copy()))
                self.runner.rng_seen = resume.rng_state.copy()
        self.records: list[StepRecord] = []
        self.wall_s = 0.0
        self.stopped_at: int | None = None

    def requests(self):
        """The decode as the scheduler drives it among others: it yields only its requests (records are kept in
        ``records``) and returns its trace."""
        decode, result = self.decode(), None
        while True:
            try:
                item = decode.send(result)
            except StopIteration:
                return self.trace()
            result = None if isinstance(item, StepRecord) else (yield item)

    def streamed(self):
        """The decode with its records, as the engine loop streams it (a snapshot after a forward); returns the
        trace."""
        yield from self.decode()
        return self.trace()

    def decode(self):
        """The decode: yields its forward requests (``engine.runtime.scheduler``) and its records, in order. What it
        kept is released at every end: its last block, a Stop or its budget (closed at a yield), a failure."""
        try:
            r, B = self.runner, self.cfg.block_size
            self._clock = time.perf_counter()
            self.policy.start(r)
            first_lo = r.first_block(B)
            start = first_lo if self.resume is None else (yield from self._resumed(first_lo, B))
            if self.resume is None and not self.cfg.fuse_commit and (yield from r.store(first_lo, "prefill")):
                yield self._record(BlockContext(r, -1, first_lo, first_lo).emit("prefill", None))
                self._clock = time.perf_counter()
            for lo in range(start, r.end, B):
                ctx = BlockContext(r, (lo - first_lo) // B, lo, min(lo + B, r.end))
                yield from self._block(ctx)
                if self.cfg.stop_at_eos and (e := r.finished_at()) is not None:
                    self.stopped_at = e
                    break
                if not self.cfg.fuse_commit and ctx.hi < r.end and (yield from r.store(ctx.hi)):
                    yield self._record(ctx.emit("commit", None))
                    self._clock = time.perf_counter()
            self.wall_s += time.perf_counter() - self._clock
        finally:
            self.runner.release()

    def _resumed(self, first_lo: int, B: int):
        """A branch's start: the forced token committed (record kind "force"); then the first block (on this
        decoder's grid) that still holds a [MASK], with the cache of everything before it rebuilt in one forward
        (kind "resume"). Returns that block's start."""
        r = self.runner
        if self.resume.force is not None:
            pos, tok = self.resume.force
            b = first_lo + (pos - first_lo) // B * B
            ctx = BlockContext(r, (b - first_lo) // B, b, min(b + B, r.end))
            ctx.commit(torch.tensor([pos - b]), torch.tensor([tok]), Reason.FORCED)
            yield self._record(ctx.emit("force", None))
        lo = next((a for a in range(first_lo, r.end, B) if r.masked(a, min(a + B, r.end)).any()), r.end)
        if (yield from r.store(lo, "resume")):
            yield self._record(BlockContext(r, -1, lo, lo).emit("resume", None))
        self._clock = time.perf_counter()
        return lo

    def _block(self, ctx: BlockContext):
        """One block under the policy: its requests go to the scheduler, which sends back their results."""
        block, result = self.policy.run_block(ctx), None
        while True:
            try:
                item = block.send(result)
            except StopIteration:
                return
            if not isinstance(item, StepRecord):       # a forward request
                result = yield item
                continue
            result = None
            yield self._record(item)
            self._clock = ctx._t0 = time.perf_counter()
            if self.cfg.stop_at_eos and not self.policy.settles_per_block and self.runner.finished_at() is not None:
                block.close()
                return

    def _record(self, rec: StepRecord) -> StepRecord:
        """Keep a record, add the engine time since the clock was last reset, and enforce the time budget
        (the caller resets the clock when the consumer hands control back)."""
        own = set(rec.extra) - GENERIC_FIELDS
        declared = payload_fields(self.policy.name, rec.kind)
        assert not own or own == declared, (f"{self.policy.name}.{rec.kind} records carry {sorted(own)}, not the "
                                            f"payload its card declares ({sorted(declared)})")
        self.records.append(rec)
        self.wall_s += time.perf_counter() - self._clock
        if self.budget_s is not None and self.wall_s > self.budget_s:
            raise BudgetExceeded(f"stopped after {len(self.records)} forwards: the time budget of "
                                 f"{self.budget_s:g} s per request was reached (UNMASK_MAX_SECONDS)",
                                 partial=self.trace())
        if self.should_stop is not None and self.should_stop():
            raise BudgetExceeded(f"stopped after {len(self.records)} forwards: the request was cancelled",
                                 partial=self.trace())
        return rec

    def run(self, client: str = "") -> Trace:
        """The decode to its end on the process's engine loop (``engine.runtime.engine_loop``)."""
        from engine.runtime.jobs import drive
        return drive(self.requests(), client)

    def stopped(self, why: str) -> Trace:
        """The trace so far, marked as stopped early by ``why`` (the engine loop's budget)."""
        tr = self.trace()
        tr.meta.limit = why
        return tr

    def generated_ids(self) -> list[int]:
        return self.runner.generated(self.records)

    def nfe_paper(self) -> int:
        """Forwards as the reference implementations count them (``Runner.nfe_paper``: SDAR's and Fast-dLLM v2's
        prefill and K/V-store forwards, DiffusionGemma's decoder forwards only)."""
        return self.runner.nfe_paper(self.records)

    def own_summary(self) -> dict:
        """The policy's summary, checked against its card's type, as the flat fields the trace saves."""
        own = self.policy.summary(self.runner)
        declared = cards()[self.policy.name].summary_type
        assert own is None or type(own) is declared, f"{self.policy.name}'s summary is not its card's {declared}"
        return asdict(own) if own is not None else {}

    def trace(self) -> Trace:
        a, r = self.adapter, self.runner
        ids = self.generated_ids()
        shown = [r.tokens.numpy()] + [ids for rec in self.records for ids in (   # tokens_after: a uniform canvas's
            rec.candidate, rec.tokens_after, rec.topk.topk_ids) if ids is not None]  # noise; topk: the candidates panel
        seen = [int(t) for t in np.unique(np.concatenate([np.ravel(ids) for ids in shown])) if t >= 0]
        vocab = {str(t): s for t, s in zip(seen, a.token_strings(seen))}
        meta = dict(
            model=a.name, model_type=a.model_type, prompt=self.prompt_text, prompt_ids=self.prompt_ids,
            prompt_len=r.P, gen_end=r.end, decoder=self.policy.name, params=self.cfg.params(), seed=self.cfg.seed,
            nfe=r.total_nfe, nfe_paper=self.nfe_paper(), nfe_by_kind=dict(r.nfe), wall_s=self.wall_s,
            token_ids=ids, text=a.decode(ids),
            final_tokens=r.tokens.tolist(), generated_tokens=len(ids), mask_token_id=a.mask_token_id,
            stop_ids=list(a.stop_ids), block_size=self.cfg.block_size, vocab=vocab, stopped_at=self.stopped_at,
            unknown_words=a.unknown_words(self.prompt_text, self.prompt_ids), attention=a.attention,
            cache=r.cache_name, compiled=compiled.label(a, r.paths),
            device=str(a.device), dtype=str(a.dtype).removeprefix("torch."),
            engine_version=__import__("engine").__version__, forward_path=dict(r.paths), **self.own_summary(),
            **({"branch": dict(self.resume.meta, nfe_resume=r.nfe["resume"])} if self.resume is not None else {}))
        return Trace(meta=TraceMeta.from_dict(meta), records=list(self.records))
