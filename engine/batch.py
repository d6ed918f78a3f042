"""Batched decoding across problems: several decodes run at once and their forwards meet in one padded batch.

Each decode runs in its own thread with all of its own state (canvas, block, commits, EOS stop, cache, random
generator) and calls ``forward`` as if it were alone. The ``Batcher`` waits until every running decode has asked
for its next forward, then runs them as one batch (``batched_forward``):

    queries   right-padded to the longest; pad rows attend only to themselves
    cache     each decode's cached K/V copied into one batched cache, padded to the longest and masked out
    masks     each decode's own (q, cache + q) mask placed in a (B, Q, C + Q) one; position ids per sequence
    results   each decode gets its own logit rows back, and its cache grows by its own new K/V only

A decode that ends leaves the batch and the next waiting problem joins it. Requests are put in job order, so a
batch's layout does not depend on thread timing. Decoders whose forwards go elsewhere (the uniform canvas) run
unbatched (``catalogue.Decoder.batches``).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from engine import masks

PAD_SLACK = 1.3     # a batch may hold up to 30 % padding tokens


@dataclass
class Request:
    index: int                       # the job's place in the run: the batch's row order
    ids: torch.Tensor                # (q,)
    mask: torch.Tensor               # (q, c + q) bool
    pos: torch.Tensor                # (q,)
    cache: DynamicCache | None
    result: object = None


def cache_len(cache) -> int:
    return cache.get_seq_length() if cache is not None else 0


def _batched_cache(adapter, reqs: list[Request], C: int) -> DynamicCache:
    """One cache holding every request's K/V at [0, c_i), zeros up to C."""
    if C == 0:
        return adapter.new_cache()
    layers = []
    for ell in range(len(next(r.cache for r in reqs if cache_len(r.cache)).layers)):
        first = next(r.cache.layers[ell] for r in reqs if cache_len(r.cache))
        k0, v0 = first.keys, first.values                                                        # (1, H, c, D)
        K = k0.new_zeros((len(reqs), k0.shape[1], C, k0.shape[3]))
        V = v0.new_zeros((len(reqs), v0.shape[1], C, v0.shape[3]))
        for i, r in enumerate(reqs):
            if (c := cache_len(r.cache)):
                K[i, :, :c], V[i, :, :c] = r.cache.layers[ell].keys[0], r.cache.layers[ell].values[0]
        layers.append((K, V))
    return DynamicCache(ddp_cache_data=layers)


@torch.no_grad()       # grad mode is per thread: the batch may run in the thread of a decode that just ended
def batched_forward(adapter, reqs: list[Request]) -> list[torch.Tensor]:
    """Every request's logits (q_i, V), as ``adapter.forward`` would give them one by one."""
    q = [len(r.ids) for r in reqs]
    c = [cache_len(r.cache) for r in reqs]
    B, Q, C = len(reqs), max(q), max(c)
    ids = torch.full((B, Q), adapter.tokenizer.pad_token_id or 0, dtype=torch.long)
    pos = torch.zeros((B, Q), dtype=torch.long)
    mask = torch.zeros((B, Q, C + Q), dtype=torch.bool)
    for i, r in enumerate(reqs):
        m = torch.as_tensor(r.mask, dtype=torch.bool)
        ids[i, :q[i]], pos[i, :q[i]] = r.ids, r.pos
        mask[i, :q[i], :c[i]], mask[i, :q[i], C:C + q[i]] = m[:, :c[i]], m[:, c[i]:]
        pad = torch.arange(q[i], Q)
        mask[i, pad, C + pad] = True
    cache = _batched_cache(adapter, reqs, C)
    am = masks.to_backend(mask, adapter.attn_impl, adapter.dtype, adapter.device)
    out = adapter.model(input_ids=ids.to(adapter.device), attention_mask=am, position_ids=pos.to(adapter.device),
                        use_cache=True, **{adapter._cache_kw: cache})
    logits = out.logits.float().cpu()                                                         # (B, Q, V)
    results = []
    for i, r in enumerate(reqs):
        rows = logits[i, :q[i]]
        if adapter.logit_shift:
            rows = torch.cat([rows[:1], rows[:-1]], 0)
        results.append(rows)
        if r.cache is not None:
            for ell, layer in enumerate(cache.layers):
                r.cache.update(layer.keys[i:i + 1, :, C:C + q[i]], layer.values[i:i + 1, :, C:C + q[i]], ell)
    return results


def batchable(adapter, reqs: list[Request]) -> bool:
    """Plain dynamic caches only (a sliding-window layer would need its own padding): else one by one."""
    return all(r.cache is None or all(type(layer) is DynamicLayer for layer in r.cache.layers) for r in reqs)


class Batcher:
    """Collects one forward from each running decode, then runs them together."""

    def __init__(self, adapter):
        self.adapter = adapter
        self.cv = threading.Condition()
        self.pending: list[Request] = []
        self.active = 0
        self.busy = False
        self.forwards = 0                    # batched forwards run (a batch of any size counts once)

    def join(self) -> None:
        with self.cv:
            self.active += 1

    def leave(self) -> None:
        with self.cv:
            self.active -= 1
            self._maybe_run()

    def forward(self, index: int, ids, mask, pos, cache) -> torch.Tensor:
        req = Request(index, ids, mask, pos, cache)
        with self.cv:
            self.pending.append(req)
            self._maybe_run()
            while req.result is None:
                self.cv.wait()
        if isinstance(req.result, BaseException):
            raise req.result
        return req.result

    def _maybe_run(self) -> None:
        """With the lock held: run the batch once every running decode waits on a forward."""
        while not self.busy and self.pending and len(self.pending) >= self.active:
            reqs, self.pending, self.busy = sorted(self.pending, key=lambda r: r.index), [], True
            self.cv.release()
            try:
                self._run(reqs)
            except Exception as e:          # every waiting decode sees the failure, and raises it
                for r in reqs:
                    r.result = e
            finally:
                self.cv.acquire()
            self.busy = False
            self.forwards += 1
            self.cv.notify_all()


    def _run(self, reqs: list[Request]) -> None:
        for group in groups(reqs):
            outs = batched_forward(self.adapter, group) if len(group) > 1 and batchable(self.adapter, group) else \
                [self.adapter.forward(r.ids, r.mask, r.pos, r.cache) for r in group]
            for r, o in zip(group, outs):
                r.result = o


def groups(reqs: list[Request], slack: float = PAD_SLACK) -> list[list[Request]]:
    """Requests of similar query length together: padding a decode step to another's prefill would cost more than
    the batch saves (on a CPU the model's time grows with the padded tokens). Greedy over the lengths, ascending:
    a request joins the group while the padded tokens stay within ``slack`` × the real ones."""
    out: list[list[Request]] = []
    for r in sorted(reqs, key=lambda r: (len(r.ids), r.index)):
        g = out[-1] if out else None
        if g is not None and (len(g) + 1) * len(r.ids) <= slack * (sum(len(x.ids) for x in g) + len(r.ids)):
            g.append(r)
        else:
            out.append([r])
    return [sorted(g, key=lambda r: r.index) for g in out]


class BatchedAdapter:
    """What one decode sees: the model adapter, with ``forward`` going through the batcher."""

    def __init__(self, adapter, batcher: Batcher, index: int):
        self._adapter, self._batcher, self._index = adapter, batcher, index

    def forward(self, input_ids, mask, position_ids, cache=None):
        return self._batcher.forward(self._index, input_ids, mask, position_ids, cache)

    def __getattr__(self, name):
        return getattr(self._adapter, name)


def run_batched(adapter, jobs: list, size: int) -> list:
    """``job(adapter_view)`` for every job, up to ``size`` at once with their forwards batched; results in order.
    A job's exception is raised here once the running ones have finished."""
    batcher = Batcher(adapter)

    def one(i, job):
        batcher.join()
        try:
            return job(BatchedAdapter(adapter, batcher, i))
        finally:
            batcher.leave()

    with ThreadPoolExecutor(max_workers=max(1, size)) as pool:
        futures = [pool.submit(one, i, job) for i, job in enumerate(jobs)]
        return [f.result() for f in futures]
