"""The ragged layout of a batched forward: the queries of several decodes side by side in one row, each attending
only to its own cache and queries, with no padding and no copy of any cache.

The projections (most of a forward's cost on a CPU) run once over all sum(q) tokens; attention runs per decode,
as that decode's own forward would run it: each decode's cache takes its new K/V (``RaggedCache.update``) and the
attention of its query rows reads, with its own mask, the K/V that cache handed back (a growing cache's whole K/V; a
Fast-dLLM splice's prefix, fresh block and suffix, not the stale block it holds). So every decode's logits are those
of its own forward but for the last bits of the projections, which sum over more rows (``tests/test_batch.py``).

This needs one hook into the stock model classes: an adapter's model runs its attention through a registered
wrapper (``AttentionInterface``, installed once when the adapter is made: ``install``) that runs the model's own
sdpa attention unchanged unless a forward passes ``unmask_segments``, and then once per segment. So the layout is
an argument of the forward, not a switch of the model. A model loaded with eager attention (each modeling file
has its own, not in the registry) keeps the padded and packed layouts (``installed`` says False).
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface, DynamicCache
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from engine.models import masks

NAME = "unmask_ragged_"


def wrapped(inner: str):
    """The attention ``inner`` (transformers' sdpa, or sdpa with LLaDA's fp32 rotation); with ``unmask_segments``
    (a ``RaggedCache``), once per decode over the K/V that decode's own cache handed back this layer."""
    def attend(module, query, key, value, attention_mask, **kwargs):
        segments = kwargs.pop("unmask_segments", None)
        own = ALL_ATTENTION_FUNCTIONS[inner]
        if segments is None:                             # every other forward: the model's own attention
            return own(module, query, key, value, attention_mask, **kwargs)
        assert segments.layer == module.layer_idx, "attention without this layer's cache update"
        outs = []
        for (lo, hi), (k, v), mask in zip(segments.spans, segments.seen, segments.masks):   # one decode's rows
            out, _ = own(module, query[:, :, lo:hi], k, v, mask, **kwargs)       # (1, q_i, H, D)
            outs.append(out)
        return torch.cat(outs, 1), None
    return attend


def install(model) -> None:
    """Run an sdpa model's attention through the wrapper (once, when its adapter is made)."""
    inner = model.config._attn_implementation
    if inner in ("sdpa", "sdpa_rope32"):
        AttentionInterface.register(NAME + inner, wrapped(inner))
        model.set_attn_implementation(NAME + inner)


def installed(adapter) -> bool:
    return str(adapter.model.config._attn_implementation).startswith(NAME)


class RaggedCache(DynamicCache):
    """Hands each decode's new K/V to that decode's own cache and keeps, for this layer's attention, the K/V each
    cache hands back (``seen``): what that decode's own forward would attend to (a growing cache's whole K/V, a
    splice's prefix, fresh block and suffix: ``engine.runtime.cache.SpliceCache``), or its own K/V without a cache."""

    def __init__(self, reqs, spans: list[tuple[int, int]], masks: list[torch.Tensor]):
        super().__init__()
        self.reqs, self.spans, self.masks = reqs, spans, masks
        self.seen: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.layer = -1                                  # the layer ``seen`` belongs to

    def update(self, keys, values, layer_idx, *args, **kwargs):
        self.layer = layer_idx
        self.seen = [r.cache.update(keys[:, :, lo:hi], values[:, :, lo:hi], layer_idx) if r.cache is not None
                     else (keys[:, :, lo:hi], values[:, :, lo:hi]) for r, (lo, hi) in zip(self.reqs, self.spans)]
        return keys, values


def ragged_forward(adapter, reqs) -> list[torch.Tensor]:
    """Every request's logits (q_i, V), as ``adapter.forward`` gives them one by one (``installed``)."""
    q = [len(r.ids) for r in reqs]
    spans = [(sum(q[:i]), sum(q[:i + 1])) for i in range(len(reqs))]
    own = [masks.to_backend(r.mask, adapter.attn_impl, adapter.dtype, adapter.device) for r in reqs]
    ids = torch.cat([r.ids for r in reqs])[None]                                      # (1, Q)
    pos = torch.cat([torch.as_tensor(r.pos) for r in reqs])[None]
    unused = torch.ones(1, 1, 1, dtype=torch.bool)      # the attention reads each segment's own mask instead
    cache = RaggedCache(reqs, spans, own)
    logits = adapter.run(ids, unused, pos, cache, unmask_segments=cache)[0]                            # (Q, V)
    return [adapter.own_rows(logits[lo:hi]) for lo, hi in spans]
