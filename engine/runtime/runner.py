"""The canvas, the cache and the forwards of one decode (``Runner``), under the block loop (``engine.runtime.loop``):
one interface, one implementation per model kind (``engine.runtime.runners.make_runner``):

    BlockCausalRunner   SDAR, Fast-dLLM v2, the embedded models: block-causal attention and its exact block cache
    FullRunner          LLaDA, Dream: every forward over the whole canvas, with Fast-dLLM's approximate caches
    CanvasRunner        DiffusionGemma (``engine.runtime.canvas``): an encoder/decoder pair, run by the uniform decoder's own requests

Forwards are generators: they yield their request to the scheduler (``engine.runtime.scheduler``) and return its result.

Block-causal canvas = prompt (P tokens) + G masked slots. Blocks are aligned to the absolute grid (``pos // B``), as SDAR
trains them, so the first generated block may also hold the prompt's tail. With the KV cache on:

* positions [0, cached) are in the cache; [cached, lo) are committed but not yet cached ("pending": the prompt's
  full blocks at the start, then the previous finished block);
* each forward runs ``pending + current block`` against the cache. Pending rows get the block-causal (or, for
  S2D2's ``cache_ver``, token-causal) mask and are *kept*; the current block is rolled back afterwards. So a
  finished block's commit forward is fused into the next block's first forward, and the prompt prefill into the
  first step: NFE counts every forward and there is no separate prefill or K/V-store forward.
  ``fuse_commit=False`` runs SDAR's separate store forward instead (kind "commit", counted in NFE).
Without the cache (``use_cache=False``) each forward recomputes [0, hi) with the same mask; tests check that both
give the same tokens and logits within 1e-5 in fp32.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import torch
from transformers import DynamicCache

from engine.models import masks, slots
from engine.models.static import StaticPath
from engine.runtime.cache import BlockCache, SpliceCache
from engine.runtime.device import device_generator
from engine.models.memory import LEDGER, Keeps, decode_bytes  # noqa: F401  (Keeps: the policies' side)
from engine.runtime.sampling import TokenStats, make_generator, token_stats
from engine.errors import CapacityError, ConfigError
from engine.runtime.scheduler import Forward, Sampling


@dataclass
class Tail:
    """Extra query rows after the block (a verifier's second half): they see the whole prefix/cache, the block
    through ``to_block`` and each other through ``to_self``; block rows see them through ``from_block``."""
    tokens: torch.Tensor                      # (m,)
    positions: torch.Tensor                   # (m,)
    to_block: torch.Tensor                    # (m, L) bool
    to_self: torch.Tensor                     # (m, m) bool
    from_block: torch.Tensor | None = None    # (L, m) bool; None = block rows never see the tail


class Runner:
    """Owns the canvas, the NFE counter and the random generator; a subclass owns the model kind's forwards and
    cache. ``revising``: written tokens of the current block may change (the policy's ``revises``);
    ``prefix_causal``: committed K/V computed token-causally (S2D2's cache_ver); ``keep_block_kv``: keep each
    block forward's K/V of the block (Fast-dLLM v2's block cache)."""
    takes_kv_cache = False                    # Fast-dLLM's prefix / dual caches (full attention only)
    cache_name = "none"

    def __init__(self, adapter, prompt_ids: list[int], cfg, prefix_causal: bool = False, revising: bool = False,
                 keep_block_kv: bool = False):
        if cfg.kv_cache != "none" and not self.takes_kv_cache:
            raise ConfigError(f"kv_cache={cfg.kv_cache} is for full-attention models; {adapter.name} is "
                              "block-causal and keeps its exact block cache (use_cache)")
        self.adapter, self.cfg = adapter, cfg
        self.P = len(prompt_ids)
        self.end = self.P + cfg.gen_length
        self.tokens = torch.tensor(prompt_ids + [adapter.mask_token_id] * cfg.gen_length, dtype=torch.long)
        self.cache = None                   # the exact block cache (block-causal models with use_cache)
        self.nfe = Counter()
        self.generator = make_generator(cfg.seed)       # the host's draws; the vocabulary's: engine.runtime.device
        self.device_generator = device_generator(cfg.seed, adapter.device, self.generator)
        self.rng_seen = self.generator.get_state().numpy()      # the stream as the latest record left it
        self.prefix_causal, self.revising = prefix_causal, revising
        self.keep_block_kv = False
        self.prefix: tuple = (0, None)      # (first position, logits) of the latest forward's recomputed rows
        self.kv_cache = cfg.kv_cache
        self.fresh: tuple | None = None     # [first, end) positions whose K/V the latest forward computed
        self.drift: float | None = None     # its max |Δ logit| against an uncached forward (measure_drift)
        self.later: torch.Tensor | None = None  # (end − hi, V) the latest forward's logits after its block (full)
        self.paths = Counter()              # how its forwards ran (``Forward.path``): the trace's forward_path
        # kept between forwards, counted by the byte ledger (``memory.decode_bytes``): ``prefix`` and ``later`` go
        # at the next request unless the rule reads them across forwards (``keeps_logits``: Prophet); ``held``, the
        # result the rule got, too where the rule's locals die with its step (``step_scoped``)
        self.keeps_logits, self.step_scoped, self.held = False, False, ()
        self.owners: list = []              # others whose ``kept()`` tensors are this decode's (its policy)
        LEDGER.track("decodes", self, decode_bytes)

    def release(self) -> None:
        """The decode ended: what it kept goes, and the ledger stops counting it."""
        self.prefix, self.later, self.held = (0, None), None, ()
        for o in self.owners:
            o.release()
        LEDGER.forget("decodes", self)

    def new_cache(self, keep_block_kv: bool = False):
        """A row of the model's static K/V pool where the static path runs (``engine.models.static``; room for
        the canvas and a verifier's tail), else a ``DynamicCache``: a block's K/V kept aside (Fast-dLLM v2's
        second level) are views of the cache, which a pool's row would overwrite."""
        static = None if keep_block_kv else StaticPath.of(self.adapter)
        slot = static.slot_cache(self.end + 2 * self.cfg.block_size) if static is not None else None
        return slot if slot is not None else self.adapter.new_cache()

    def sharing(self, adapter) -> "Runner":
        """A runner of the same kind on another model (SimSD's drafter) over this canvas, NFE counter and
        generator: what it writes and counts is this decode's."""
        twin = type(self)(adapter, self.tokens[:self.P].tolist(), self.cfg)
        twin.tokens, twin.nfe, twin.generator, twin.device_generator = (self.tokens, self.nfe, self.generator,
                                                                        self.device_generator)
        return twin

    @property
    def total_nfe(self) -> int:
        return sum(self.nfe.values())

    def masked(self, lo: int, hi: int) -> torch.Tensor:
        return torch.from_numpy(self.masked_np(lo, hi))

    def masked_np(self, lo: int, hi: int) -> np.ndarray:
        """(hi − lo,) bool, in numpy: a rule's few dozen values cost less there than torch's dispatch."""
        return self.tokens.numpy()[lo:hi] == self.adapter.mask_token_id

    def sampling(self) -> Sampling:
        c = self.cfg          # a card that offers ``precision`` may rank in the model's dtype (LLaDA's release)
        precision = self.adapter.dtype if getattr(c, "precision", "float64") == "model" else torch.float64
        return Sampling(c.temperature, c.top_k, c.top_p, self.device_generator, self.adapter.mask_token_id, precision)

    def forward(self, kind: str, lo: int, hi: int, block_mask: torch.Tensor | None = None,
                tail: Tail | None = None, block_tokens: torch.Tensor | None = None):
        """One forward over [prefix rows | block rows lo..hi | tail rows] (a generator: it yields its request to
        the scheduler); returns (block logits (L, V), tail logits).

        block_mask (L, L): in-block attention of block rows (default: all, the block-diffusion pattern).
        block_tokens (L,): what the block rows hold (default: the canvas). Only prefix rows are kept in the cache.
        """
        block, tail_logits, _ = yield from self._forward(kind, lo, hi, block_mask, tail, block_tokens, False)
        self.held = (block, tail_logits)
        return block, tail_logits

    def draft(self, kind: str, lo: int, hi: int, block_mask: torch.Tensor | None = None,
              block_tokens: torch.Tensor | None = None):
        """A forward whose block rows' token statistics the scheduler computes with the round's: (logits, stats)."""
        block, _, stats = yield from self._forward(kind, lo, hi, block_mask, None, block_tokens, True)
        self.held = (block, stats.probs)
        return block, stats

    def _forward(self, kind, lo, hi, block_mask, tail, block_tokens, want_stats: bool):
        raise NotImplementedError(f"{type(self).__name__} runs no forwards of its own")

    def _request(self, ids, mask, pos, cache, want_stats: bool, rows: slice):
        """Yields the forward's request (a generator) and returns its result, counting how it ran."""
        if (why := slots.overflow(cache, len(ids))) is not None:   # this decode alone ends, before any write
            raise CapacityError(why)
        req = Forward(self.adapter, ids, mask, pos, cache, self.sampling() if want_stats else None, rows, owner=self)
        if not self.keeps_logits:
            self.prefix, self.later = (0, None), None
        if self.step_scoped:
            self.held = ()
        result = yield req
        self.paths[req.path] += 1
        return result

    def first_block(self, B: int) -> int:
        """Where the first generated block starts: full-attention and canvas families count blocks from the
        prompt's end, as LLaDA's generate.py and DiffusionGemma's generate do."""
        return self.P

    def generated(self, records) -> list[int]:
        """The ids the run decided up to and including the first stop token (never a slot a partial run left masked)."""
        gen = self.tokens[self.P:self.end].tolist()
        stops = set(self.adapter.stop_ids)
        end = next((i + 1 for i, t in enumerate(gen) if t in stops), None)
        return self._unfinished(gen[:end], records)

    def _unfinished(self, gen: list[int], records) -> list[int]:
        return [t for t in gen if t != self.adapter.mask_token_id]      # the still-masked slots dropped

    def nfe_paper(self, records) -> int:
        """Forwards as the reference implementations count them (``Generation.nfe_paper``)."""
        return self.total_nfe

    def logits_of(self, lo: int, hi: int) -> torch.Tensor | None:
        """(hi - lo, V) the logits the latest forward that recomputed positions [lo, hi) gave them (a finished
        block is recomputed once, in the next block's first forward or its store forward), or None."""
        start, logits = self.prefix
        if logits is None or lo < start or hi > start + len(logits) or self.adapter.logit_shift:
            return None
        return logits[lo - start:hi - start]

    def uncache_from(self, pos: int) -> None:
        """Drop cached K/V from `pos` on (a revised finished block): the next forward recomputes it."""

    def store(self, hi: int, kind: str = "commit"):
        """Unfused commit (SDAR's store pass): False where there is no exact cache to store into."""
        return False
        yield                                 # a generator, as the runners that do store

    def stats(self, logits: torch.Tensor) -> TokenStats:
        c = self.cfg
        return token_stats(self.unmaskable(logits), c.temperature, c.top_k, c.top_p, self.device_generator)

    def unmaskable(self, logits: torch.Tensor) -> torch.Tensor:
        """Forbid predicting [MASK] itself: committing it would leave the slot masked forever."""
        out = logits.clone()
        out[:, self.adapter.mask_token_id] = float("-inf")
        return out

    def finished_at(self) -> int | None:
        """Index of the first stop token in the generated region once everything before it is decoded."""
        gen = self.tokens[self.P:self.end]
        stops = torch.isin(gen, torch.tensor(self.adapter.stop_ids or [-1]))
        if not stops.any():
            return None
        e = int(stops.nonzero()[0, 0])
        return self.P + e if not (gen[:e] == self.adapter.mask_token_id).any() else None


class BlockCausalRunner(Runner):
    """Block-causal attention (SDAR's training) and its exact block cache (``use_cache``)."""

    def __init__(self, adapter, prompt_ids, cfg, prefix_causal=False, revising=False, keep_block_kv=False):
        super().__init__(adapter, prompt_ids, cfg, prefix_causal, revising)
        self.cache = BlockCache(self.new_cache(keep_block_kv)) if cfg.use_cache else None
        self.cached = 0
        self.keep_block_kv = keep_block_kv and self.cache is not None
        self.block_kv: tuple | None = None  # (block start, DynamicCache of [0, block end))
        self.cache_name = "exact block KV cache" if self.cache is not None else "none"

    def first_block(self, B: int) -> int:
        return (self.P // B) * B               # blocks lie on the absolute grid (SDAR's training)

    def _prefix_mask(self, start: int, lo: int) -> torch.Tensor:
        pos = torch.arange(start, lo)
        keys = torch.arange(0, lo)
        if self.prefix_causal:
            return masks.causal(pos, keys)
        return masks.block_causal(pos, keys, self.cfg.block_size)

    def _forward(self, kind, lo, hi, block_mask, tail, block_tokens, want_stats: bool):
        """[pending rows | block | tail] against the exact cache; the pending rows' K/V are kept."""
        keep = max(0, lo - self.adapter.logit_shift)   # a shifted model reads position lo's logit at row lo - 1
        start = self.cached if self.cache is not None else 0
        L = hi - lo
        blk_tok = self.tokens[lo:hi] if block_tokens is None else block_tokens
        tail = tail or Tail(torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long),
                            torch.zeros(0, L, dtype=torch.bool), torch.zeros(0, 0, dtype=torch.bool))
        t_tok, t_pos, t_blk, t_self = tail.tokens, tail.positions, tail.to_block, tail.to_self
        m = len(t_tok)
        n_pre = lo - start
        ids = torch.cat([self.tokens[start:lo], blk_tok, t_tok])   # (q,)
        pos = torch.cat([torch.arange(start, hi), t_pos])
        q = n_pre + L + m
        mask = torch.zeros(q, start + q, dtype=torch.bool)
        mask[:n_pre, :lo] = self._prefix_mask(start, lo)
        mask[n_pre:, :lo] = True                              # block and tail rows see every earlier block
        mask[n_pre:n_pre + L, lo:hi] = True if block_mask is None else block_mask
        mask[n_pre + L:, lo:hi] = t_blk
        mask[n_pre + L:, hi:] = t_self
        if tail.from_block is not None:
            mask[n_pre:n_pre + L, hi:] = tail.from_block
        cache = self.cache.cache if self.cache is not None else None
        logits, stats = yield from self._request(ids, mask, pos, cache, want_stats,
                                                 slice(n_pre, n_pre + L))                               # (q, V)
        if self.cache is not None:
            if self.keep_block_kv and m == 0:      # Fast-dLLM v2's second level: the block's K/V as this forward left them
                self.block_kv = (lo, DynamicCache(ddp_cache_data=[(x.keys[..., :hi, :], x.values[..., :hi, :])
                                                                  for x in self.cache.cache.layers]))
            self.cache.rollback(keep)
            self.cached = keep
        self.nfe[kind] += 1
        if n_pre:
            self.prefix = (start, logits[:n_pre])
        return logits[n_pre:n_pre + L], (logits[n_pre + L:] if m else None), stats

    def forward_rows(self, kind: str, a: int, b: int) -> torch.Tensor:
        """Rows [a, b) of the current block alone (a sub-block), against the exact cache of the finished blocks and
        the block's other K/V as its latest whole-block forward left them (stale), spliced in position order:
        Fast-dLLM v2's block cache. (b - a, V) logits; a shifted model's first row reads its own logit."""
        lo, kv = self.block_kv
        n = kv.get_seq_length()
        logits, _ = yield Forward(self.adapter, self.tokens[a:b], torch.ones(b - a, n, dtype=torch.bool),
                                  torch.arange(a, b), SpliceCache(kv, a, b))
        self.nfe[kind] += 1
        self.fresh = (a, b)
        return logits

    def uncache_from(self, pos: int) -> None:
        if self.cache is not None and self.cached > pos:
            self.cache.rollback(pos)
            self.cached = pos

    def store(self, hi: int, kind: str = "commit"):
        """Unfused commit: run the pending committed positions once and keep their K/V (SDAR's store pass)."""
        if self.cache is None or self.cached >= hi:
            return False
        yield from self.forward(kind, hi, hi)
        return True

    def nfe_paper(self, records) -> int:
        """With the cache (SDAR's ``block_diffusion_generate``, Fast-dLLM v2): one prefill forward over the
        prompt's full blocks and one K/V-store forward per block decoded, both of which Unmask fuses into its
        next forward (or counts as kinds "prefill" / "commit" with fuse_commit off). Without: every forward."""
        if self.cache is None:
            return self.total_nfe
        denoise = self.total_nfe - self.nfe["prefill"] - self.nfe["commit"]
        prefill = int(self.P // self.cfg.block_size > 0)
        return denoise + prefill + len({rec.block for rec in records if rec.block >= 0})


class FullRunner(Runner):
    """Full attention (LLaDA, Dream), with Fast-dLLM's approximate prefix and dual caches (``kv_cache``)."""
    takes_kv_cache = True

    def __init__(self, adapter, prompt_ids, cfg, prefix_causal=False, revising=False, keep_block_kv=False):
        super().__init__(adapter, prompt_ids, cfg, prefix_causal, revising)
        self.full_cache, self.prefix_of = None, None        # the block start's cache and the block start
        self._canvas: tuple | None = None                   # (n, n) mask and (n,) positions of a whole-canvas forward
        self.cache_name = f"{self.kv_cache} cache (Fast-dLLM, approximate)" if self.kv_cache != "none" else "none"

    def _forward(self, kind, lo, hi, block_mask, tail, block_tokens, want_stats: bool):
        """Full-attention families (Dream, LLaDA): a forward runs the whole canvas bidirectionally (prompt,
        committed tokens, the current block and every later masked slot), as their reference decoders do.
        Fast-dLLM's approximate caches: a block's first forward runs the whole canvas and keeps its K/V; its later
        forwards run ``prefix``: [block start, end) against the prefix's K/V, ``dual``: only the block, against
        the prefix's and the suffix's (``SpliceCache``). A shifted model (Dream) also recomputes the row before the
        block, whose logit is the block's first slot's. ``fresh`` is the range of positions whose K/V the forward
        computed; ``drift`` (``measure_drift``) the max |Δ logit| of the block's rows against an uncached forward."""
        assert tail is None and block_mask is None, "full-attention models take no verifier rows or block masks"
        ids = torch.from_numpy(self.tokens.numpy()[:self.end].copy())                        # (n,)
        if block_tokens is not None:
            ids[lo:hi] = block_tokens
        n = self.end
        self.nfe[kind] += 1
        a = lo - self.adapter.logit_shift                     # the first row a cached forward recomputes
        if self.kv_cache != "none" and self.prefix_of == lo:
            b = n if self.kv_cache == "prefix" else hi
            full = self.full_cache.cache
            cache = full if self.kv_cache == "prefix" else full.splice(a, hi) if hasattr(full, "splice") else \
                SpliceCache(full, a, hi)
            logits, stats = yield from self._request(ids[a:b], torch.ones(b - a, n, dtype=torch.bool),
                                                     torch.arange(a, b), cache, want_stats, slice(lo - a, hi - a))
            self.later = logits[hi - a:] if self.kv_cache == "prefix" else None            # (n − hi, V)
            logits = logits[lo - a:hi - a].clone()          # (L, V), its own: the rule's hold keeps no more
            if self.kv_cache == "prefix":
                self.full_cache.rollback(a)
            self.fresh = (a, b)
            self.drift = (yield from self._drift(ids, lo, hi, logits)) if self.cfg.measure_drift else None
            return logits, None, stats
        cache = BlockCache(self.new_cache()) if self.kv_cache != "none" else None
        if self._canvas is None:                              # the whole canvas's mask and positions, read only
            self._canvas = torch.ones(n, n, dtype=torch.bool), torch.arange(n)
        logits, stats = yield from self._request(ids, *self._canvas, cache.cache if cache is not None else None,
                                                 want_stats, slice(lo, hi))                      # (n, V)
        if cache is not None:
            if self.kv_cache == "prefix":
                cache.rollback(a)
            self.full_cache, self.prefix_of = cache, lo
        self.fresh, self.drift = (0, n), (0.0 if self.cfg.measure_drift else None)       # exact
        self.prefix, self.later = (0, logits[:lo]), logits[hi:]
        return logits[lo:hi].clone(), None, stats          # its own: the (n, V) goes with prefix and later

    def _drift(self, ids: torch.Tensor, lo: int, hi: int, cached: torch.Tensor) -> float:
        """max |Δ logit| over the block's rows: the cached forward against an uncached one of the same canvas (a
        measurement: not counted in NFE)."""
        n = len(ids)
        exact, _ = yield Forward(self.adapter, ids, torch.ones(n, n, dtype=torch.bool), torch.arange(n), None)
        exact = exact[lo:hi]
        return float((cached - exact).abs().max())

    def uncache_from(self, pos: int) -> None:
        self.prefix_of = None                 # a prefix cache holding the old tokens is made again

    def logits_of(self, lo: int, hi: int) -> torch.Tensor | None:
        """Also a shifted model's (Dream): a whole-canvas forward's rows are aligned but at the canvas's first."""
        start, logits = self.prefix
        ok = logits is not None and max(start, self.adapter.logit_shift) <= lo and hi <= start + len(logits)
        return logits[lo - start:hi - start] if ok else None
