"""Exact block-level KV cache around ``DynamicCache``: keep what is committed, roll back everything else.

Rollback uses the portable negative ``crop``: on transformers 5.2x ``crop(n)`` accepts only n <= 0 (a positive n
raises) and on 5.0 ``crop(0)`` empties the cache, so we only ever call ``crop(-k)`` with k > 0.
Under block-causal attention a committed block's K/V depend only on earlier blocks, so caching is exact.
"""

from __future__ import annotations

import numpy as np
import torch
from transformers import DynamicCache

from engine.models.slots import SlotCache


class BlockCache:
    def __init__(self, cache: DynamicCache):
        self.cache = cache

    def __len__(self) -> int:
        return self.cache.get_seq_length()

    def rollback(self, length: int) -> None:
        """Drop every cached position at index >= length."""
        extra = len(self) - length
        if extra > 0:
            self.cache.crop(-extra)
        elif extra < 0:
            raise ValueError(f"cannot roll back to {length}: cache holds only {len(self)}")


class SpliceCache(DynamicCache):
    """Fast-dLLM's dual cache as a transformers cache. ``full`` holds the K/V of the whole canvas from the block's
    first forward; a later forward runs only the block's rows, which attend to [prefix | the block's own fresh K/V |
    suffix] in position order, as Fast-dLLM's ``replace_position`` splices them. Nothing is stored: the next block
    begins with a full forward, and the block's rows are recomputed by every forward of the block."""

    def __init__(self, full: DynamicCache, lo: int, hi: int):
        super().__init__(ddp_cache_data=[(layer.keys, layer.values) for layer in full.layers])
        self.lo, self.hi, self.n = lo, hi, full.get_seq_length()

    def update(self, key_states, value_states, layer_idx: int, *args, **kwargs):
        layer, lo, hi = self.layers[layer_idx], self.lo, self.hi
        keys = torch.cat([layer.keys[..., :lo, :], key_states, layer.keys[..., hi:, :]], dim=-2)
        values = torch.cat([layer.values[..., :lo, :], value_states, layer.values[..., hi:, :]], dim=-2)
        return keys, values

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.n - (self.hi - self.lo)      # the keys a block row sees besides its own block

    def beside(self, layer_idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The K/V a block row sees besides its own block's, prefix then suffix (1, H, n - (hi - lo), D): what a
        batched layout (``engine.runtime.batch``) puts in its cache; the stale block in between is never read."""
        layer, lo, hi = self.layers[layer_idx], self.lo, self.hi
        return (torch.cat([layer.keys[..., :lo, :], layer.keys[..., hi:, :]], dim=-2),
                torch.cat([layer.values[..., :lo, :], layer.values[..., hi:, :]], dim=-2))

    def columns(self) -> np.ndarray:
        """A mask's columns reordered as a batched layout numbers its keys: (prefix, suffix, the block's own). The
        engine's mask over a splice numbers them in position order (prefix, block, suffix), as ``update`` hands
        the keys to attention."""
        return np.r_[0:self.lo, self.hi:self.n, self.lo:self.hi]


def round_cache(req):
    """The KV cache a round may grow for ``req``: a forward's own, or the ``DynamicCache`` a ``Call`` is handed (the
    canvas encoder's, which ``encode`` extends in place). None: nothing to cut back."""
    cache = getattr(req, "cache", None)
    if cache is None:
        cache = next((a for a in getattr(req, "args", ()) if isinstance(a, DynamicCache)), None)
    return cache


def cache_lengths(cache) -> list | int | None:
    """What a cache holds before a round (``restore`` puts it back): a slot cache's length (``engine.models.slots``),
    or per layer of a ``DynamicCache`` its cached length; a sliding-window layer's attributes themselves (it drops
    its oldest positions as it grows, so no length gives them back; it keeps at most a window, so holding its old
    tensors through a round costs little, where holding a full layer's would double the cache). A round that raised
    may have grown any of them (a later forward of the round, or the round's statistics, failed after a forward grew
    it): the engine loop's retry cuts it back."""
    if cache is None:
        return None
    if isinstance(cache, SlotCache):
        return cache.length
    return [dict(vars(layer)) if hasattr(layer, "cumulative_length") else
            layer.keys.shape[-2] if getattr(layer, "keys", None) is not None and layer.keys.numel() else 0
            for layer in cache.layers]


def restore(cache, lengths: list | int | None) -> None:
    """Put a cache back as ``cache_lengths`` found it before a round that raised. A slot cache's length is an
    integer (the K/V written past it are never read); a full layer keeps a view of its first ``n`` positions (the
    grown tensor's storage goes at the layer's next write, as transformers' own ``crop`` leaves it)."""
    if lengths is None:
        return
    if isinstance(lengths, int):
        cache.length = lengths
        return
    for layer, n in zip(cache.layers, lengths):
        if isinstance(n, dict):
            vars(layer).clear()
            vars(layer).update(n)
        elif getattr(layer, "keys", None) is not None and layer.keys.numel() and layer.keys.shape[-2] > n:
            layer.keys, layer.values = layer.keys[..., :n, :], layer.values[..., :n, :]
