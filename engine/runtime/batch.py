"""The layouts of one batched forward: the requests of a round (``engine.runtime.scheduler``) that run on one model.

    ragged   the queries side by side in one row of sum(q) tokens; attention per decode, on its own cache, which
             is neither copied nor padded (``engine.models.ragged``): on a CPU, always (a CPU runs a few small
             attention calls as fast as one large one)
    packed   the same row, but one attention over all caches side by side, each query masked to its own cache
             and queries: on an accelerator, when attention is cheap beside the projections (short contexts)
    padded   one row per decode, right-padded to the longest query and cache, padding masked out: on an
             accelerator, when attention dominates (long canvases); pad queries attend to themselves

``layout`` picks one (``UNMASK_LAYOUT`` pins one on any device: CI runs an accelerator's layouts on its CPU,
``tests/test_layouts.py``); it is an argument of the forward, not a setting of the model. Each request gets its own
logit rows back (as ``adapter.forward`` gives them) and its cache grows by its own new K/V only. A splice (Fast-dLLM's
dual cache, ``engine.runtime.cache.SpliceCache``) holds the whole canvas's K/V but its queries see only its prefix and
suffix besides their own: that is what a layout puts in the round's cache (``_beside``), and a splice stores nothing.
"""

from __future__ import annotations

import numpy as np
import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from engine.models import ragged
from engine.models.static import B_BUCKETS, StaticPath, group, reason
from engine.runtime.cache import SpliceCache
from engine.settings import get


def cache_len(cache) -> int:
    return cache.get_seq_length() if cache is not None else 0


def layout(adapter, reqs: list) -> str:
    """``UNMASK_LAYOUT`` where it names one (so CI runs a GPU's layouts on a CPU); else (auto) 'ragged' on a CPU (a
    per-decode attention costs a few small calls, which a CPU runs as fast as one large one) and elsewhere 'packed'
    or 'padded', whichever costs fewer estimated multiply-adds: a token through the projections costs about 12·h²
    per layer, a (query, key) pair of attention about 4·h (h = hidden width). Ragged needs the attention wrapper
    (``ragged.installed``): a model without it gets auto's choice."""
    forced = get("UNMASK_LAYOUT")
    if forced in ("packed", "padded"):
        return forced
    if ragged.installed(adapter) and (forced == "ragged" or torch.device(adapter.device).type == "cpu"):
        return "ragged"
    return cheaper_layout(adapter, reqs)


def cheaper_layout(adapter, reqs: list) -> str:
    q, c = [len(r.ids) for r in reqs], [cache_len(r.cache) for r in reqs]
    pair = 1.0 / (3 * adapter.model.config.get_text_config().hidden_size)     # a pair's cost in tokens
    Q, C = max(q), max(c)
    padded = len(reqs) * Q * (1 + (C + Q) * pair)
    packed = sum(q) * (1 + (sum(c) + sum(q)) * pair)
    return "packed" if packed <= padded else "padded"


def _grow(r, cache: DynamicCache, row: int, a: int) -> None:
    """The request's cache takes the K/V the forward computed for its queries (row ``row``, from ``a``); a splice
    (Fast-dLLM's dual cache) stores nothing, as its own forward would not."""
    if r.cache is not None and not isinstance(r.cache, SpliceCache):
        for ell, layer in enumerate(cache.layers):
            new = slice(a, a + len(r.ids))
            r.cache.update(layer.keys[row:row + 1, :, new], layer.values[row:row + 1, :, new], ell)


def _beside(cache, ell: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The K/V of layer ``ell`` that a request's queries see besides their own, (1, H, c, D): a splice's prefix and
    suffix without its stale block (``SpliceCache.beside``), else the whole cache."""
    if isinstance(cache, SpliceCache):
        return cache.beside(ell)
    return cache.layers[ell].keys, cache.layers[ell].values


def _mask(r) -> np.ndarray:
    """The request's (q, c + q) mask with its columns as the layouts number keys: the cache's c, then the queries'
    (a splice's mask comes in position order: ``SpliceCache.columns``)."""
    m = np.asarray(r.mask, dtype=bool)
    return m[:, r.cache.columns()] if isinstance(r.cache, SpliceCache) else m


def packed_forward(adapter, reqs: list) -> list[torch.Tensor]:
    """Every request's logits (q_i, V), as ``adapter.forward`` gives them one by one: one row of sum(q) tokens."""
    q, c = [len(r.ids) for r in reqs], [cache_len(r.cache) for r in reqs]
    Q, C = sum(q), sum(c)
    qo, co = [sum(q[:i]) for i in range(len(reqs))], [sum(c[:i]) for i in range(len(reqs))]
    mask = torch.zeros((Q, C + Q), dtype=torch.bool)
    for i, r in enumerate(reqs):
        m, rows = torch.from_numpy(_mask(r)), slice(qo[i], qo[i] + q[i])
        mask[rows, co[i]:co[i] + c[i]], mask[rows, C + qo[i]:C + qo[i] + q[i]] = m[:, :c[i]], m[:, c[i]:]
    with_kv = [r.cache for r in reqs if cache_len(r.cache)]
    cache = DynamicCache(ddp_cache_data=[
        tuple(torch.cat(kv, 2) for kv in zip(*(_beside(x, ell) for x in with_kv)))
        for ell in range(len(with_kv[0].layers))]) if with_kv else _fresh_cache(adapter, reqs)     # (1, H, C, D)
    ids, pos = torch.cat([r.ids for r in reqs])[None], torch.cat([torch.as_tensor(r.pos) for r in reqs])[None]
    logits = adapter.run(ids, mask[None], pos, cache)[0]                                        # (Q, V)
    for i, r in enumerate(reqs):
        _grow(r, cache, 0, C + qo[i])
    return [adapter.own_rows(logits[qo[i]:qo[i] + q[i]]) for i in range(len(reqs))]


def _fresh_cache(adapter, reqs: list) -> DynamicCache | None:
    """An empty cache for a round whose requests have none filled yet; None when none of them keeps one (a
    full-attention canvas without a cache): the forward then stores no K/V, as ``adapter.forward`` runs it alone,
    instead of two copies per layer that nobody reads."""
    return adapter.new_cache() if any(r.cache is not None for r in reqs) else None


def _padded_cache(adapter, reqs: list, C: int) -> DynamicCache | None:
    """One cache holding every request's K/V at [0, c_i), zeros up to C."""
    with_kv = [r.cache for r in reqs if cache_len(r.cache)]
    if not with_kv:
        return _fresh_cache(adapter, reqs)
    layers = []
    for ell in range(len(with_kv[0].layers)):
        k0, v0 = with_kv[0].layers[ell].keys, with_kv[0].layers[ell].values                  # (1, H, c, D)
        K, V = (x.new_zeros((len(reqs), x.shape[1], C, x.shape[3])) for x in (k0, v0))
        for i, r in enumerate(reqs):
            if (n := cache_len(r.cache)):
                k, v = _beside(r.cache, ell)
                K[i, :, :n], V[i, :, :n] = k[0], v[0]
        layers.append((K, V))
    return DynamicCache(ddp_cache_data=layers)


def padded_forward(adapter, reqs: list) -> list[torch.Tensor]:
    """Every request's logits (q_i, V), as ``adapter.forward`` gives them one by one: one padded row each."""
    q, c = [len(r.ids) for r in reqs], [cache_len(r.cache) for r in reqs]
    B, Q, C = len(reqs), max(q), max(c)
    # built in numpy on the host: a few writes per request, which torch's dispatch would make the round's cost
    ids = np.full((B, Q), adapter.tokenizer.pad_token_id or 0, dtype=np.int64)
    pos = np.zeros((B, Q), dtype=np.int64)
    mask = np.zeros((B, Q, C + Q), dtype=bool)
    for i, r in enumerate(reqs):
        m = _mask(r)
        ids[i, :q[i]], pos[i, :q[i]] = np.asarray(r.ids), np.asarray(r.pos)
        mask[i, :q[i], :c[i]], mask[i, :q[i], C:C + q[i]] = m[:, :c[i]], m[:, c[i]:]
        pad = np.arange(q[i], Q)
        mask[i, pad, C + pad] = True
    cache = _padded_cache(adapter, reqs, C)
    logits = adapter.run(torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(pos), cache)   # (B, Q, V)
    for i, r in enumerate(reqs):
        _grow(r, cache, i, C)
    return [adapter.own_rows(logits[i, :q[i]]) for i in range(B)]


def batchable(reqs: list) -> bool:
    """Plain dynamic caches only, growing or spliced (a sliding-window layer would need its own layout): else one by
    one. Splices batch: every layout reads their fresh block (``_beside``), faster than one by one on the CPU
    (``tools/experiments/splice_layouts.py``)."""
    return all(r.cache is None or all(type(layer) is DynamicLayer for layer in r.cache.layers) for r in reqs)


def run_forwards(adapter, reqs: list) -> list[torch.Tensor]:
    """Every request's logits (q_i, V). Where the static path is on (``engine.models.static``), the requests it
    takes run there and the rest eagerly; each request's ``path`` says how it ran."""
    static = StaticPath.of(adapter)
    if static is None:
        return eager_forwards(adapter, reqs)
    why = [reason(adapter, r) for r in reqs]
    groups: dict = {}
    for i, w in enumerate(why):
        if w is None:
            groups.setdefault(group(reqs[i]), []).append(i)
    rest = [i for i, w in enumerate(why) if w is not None]
    out: list = [None] * len(reqs)
    for part in (g[k:k + B_BUCKETS[-1]] for g in groups.values() for k in range(0, len(g), B_BUCKETS[-1])):
        logits, how = static.run([reqs[i] for i in part])
        for i, x in zip(part, logits):
            out[i], reqs[i].path = x, how
    for i, x in zip(rest, eager_forwards(adapter, [reqs[i] for i in rest]) if rest else []):
        out[i], reqs[i].path = x, f"eager: {why[i]}"
    return out


def eager_forwards(adapter, reqs: list) -> list[torch.Tensor]:
    if len(reqs) == 1 or not batchable(reqs):
        return [adapter.forward(r.ids, r.mask, r.pos, r.cache) for r in reqs]
    forward = {"ragged": ragged.ragged_forward, "packed": packed_forward, "padded": padded_forward}
    return forward[layout(adapter, reqs)](adapter, reqs)
