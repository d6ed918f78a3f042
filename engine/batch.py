"""Batched decoding across problems: several decodes run at once and their forwards meet in one batched forward.

Each decode runs in its own thread with all of its own state (canvas, block, commits, EOS stop, cache, random
generator) and calls ``forward`` as if it were alone. A ``Lane`` holds up to ``size`` decodes; once every running
decode of the lane has asked for its next forward, it runs them as one forward, in one of three layouts:

    ragged   the queries side by side in one row of sum(q) tokens; attention per decode, on its own cache, which
             is neither copied nor padded (``engine.ragged``): on a CPU, always (a CPU runs a few small
             attention calls as fast as one large one)
    packed   the same row, but one attention over all caches side by side, each query masked to its own cache
             and queries: on an accelerator, when attention is cheap beside the projections (short contexts)
    padded   one row per decode, right-padded to the longest query and cache, padding masked out: on an
             accelerator, when attention dominates (long canvases); pad queries attend to themselves

``layout`` picks one. Each decode gets its own logit rows back and its cache grows by its own new K/V only.

The lane is a baton: a decode thread runs Python only while it holds the lane's lock, which it gives up while it
waits on a forward, so one decode at a time runs its rule and the waiting ones do not fight over the GIL. Two
lanes (``LANES``) take alternate problems: while one lane's forward runs (torch releases the GIL inside its
kernels), the other lane's decoders run their rules, so the two cores are both at work. A forward needs the GIL
back after each kernel; while the other lane runs plain Python it would wait out Python's switch interval (5 ms)
each time, so lanes run with a shorter one (``SWITCH_S``).

Determinism: a lane's jobs are taken in order and every running decode posts exactly one forward per round, so
which decodes share a forward does not depend on thread timing; requests are laid out in job order. A decode that
ends leaves and the lane's next job takes its place in the same round. Decoders whose forwards go elsewhere (the
uniform canvas) run unbatched (``catalogue.Decoder.batches``).
"""

from __future__ import annotations

import sys
import threading
import time
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from engine import ragged

LANES = 2             # one lane's forward runs while the other lane's decoders run their rules
SWITCH_S = 5e-4       # the GIL switch interval while lanes run (Python's default: 5 ms)


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


def layout(adapter, reqs: list[Request]) -> str:
    """'ragged' on a CPU (a per-decode attention costs a few small calls, which a CPU runs as fast as one large
    one); elsewhere 'packed' or 'padded', whichever costs fewer estimated multiply-adds: a token through the
    projections costs about 12·h² per layer, a (query, key) pair of attention about 4·h (h = hidden width)."""
    if torch.device(adapter.device).type == "cpu" and ragged.enable(adapter):
        return "ragged"
    return cheaper_layout(adapter, reqs)


def cheaper_layout(adapter, reqs: list[Request]) -> str:
    q, c = [len(r.ids) for r in reqs], [cache_len(r.cache) for r in reqs]
    pair = 1.0 / (3 * adapter.model.config.get_text_config().hidden_size)     # a pair's cost in tokens
    Q, C = max(q), max(c)
    padded = len(reqs) * Q * (1 + (C + Q) * pair)
    packed = sum(q) * (1 + (sum(c) + sum(q)) * pair)
    return "packed" if packed <= padded else "padded"


def _grow(r: Request, cache: DynamicCache, row: int, a: int) -> None:
    """The request's cache takes the K/V the forward computed for its queries (row ``row``, from ``a``)."""
    if r.cache is not None:
        for ell, layer in enumerate(cache.layers):
            new = slice(a, a + len(r.ids))
            r.cache.update(layer.keys[row:row + 1, :, new], layer.values[row:row + 1, :, new], ell)


def packed_forward(adapter, reqs: list[Request]) -> list[torch.Tensor]:
    """Every request's logits (q_i, V), as ``adapter.forward`` gives them one by one: one row of sum(q) tokens."""
    q, c = [len(r.ids) for r in reqs], [cache_len(r.cache) for r in reqs]
    Q, C = sum(q), sum(c)
    qo, co = [sum(q[:i]) for i in range(len(reqs))], [sum(c[:i]) for i in range(len(reqs))]
    mask = torch.zeros((Q, C + Q), dtype=torch.bool)
    for i, r in enumerate(reqs):
        m, rows = torch.as_tensor(r.mask, dtype=torch.bool), slice(qo[i], qo[i] + q[i])
        mask[rows, co[i]:co[i] + c[i]], mask[rows, C + qo[i]:C + qo[i] + q[i]] = m[:, :c[i]], m[:, c[i]:]
    with_kv = [r.cache for r in reqs if cache_len(r.cache)]
    cache = DynamicCache(ddp_cache_data=[
        (torch.cat([x.layers[ell].keys for x in with_kv], 2), torch.cat([x.layers[ell].values for x in with_kv], 2))
        for ell in range(len(with_kv[0].layers))]) if with_kv else adapter.new_cache()     # (1, H, C, D)
    ids, pos = torch.cat([r.ids for r in reqs])[None], torch.cat([torch.as_tensor(r.pos) for r in reqs])[None]
    logits = adapter.run(ids, mask[None], pos, cache)[0]                                        # (Q, V)
    for i, r in enumerate(reqs):
        _grow(r, cache, 0, C + qo[i])
    return [adapter.own_rows(logits[qo[i]:qo[i] + q[i]]) for i in range(len(reqs))]


def _padded_cache(adapter, reqs: list[Request], C: int) -> DynamicCache:
    """One cache holding every request's K/V at [0, c_i), zeros up to C."""
    with_kv = [r.cache for r in reqs if cache_len(r.cache)]
    if not with_kv:
        return adapter.new_cache()
    layers = []
    for ell in range(len(with_kv[0].layers)):
        k0 = with_kv[0].layers[ell].keys                                                       # (1, H, c, D)
        K, V = (k0.new_zeros((len(reqs), k0.shape[1], C, k0.shape[3])) for _ in range(2))
        for i, r in enumerate(reqs):
            if (n := cache_len(r.cache)):
                K[i, :, :n], V[i, :, :n] = r.cache.layers[ell].keys[0], r.cache.layers[ell].values[0]
        layers.append((K, V))
    return DynamicCache(ddp_cache_data=layers)


def padded_forward(adapter, reqs: list[Request]) -> list[torch.Tensor]:
    """Every request's logits (q_i, V), as ``adapter.forward`` gives them one by one: one padded row each."""
    q, c = [len(r.ids) for r in reqs], [cache_len(r.cache) for r in reqs]
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
    cache = _padded_cache(adapter, reqs, C)
    logits = adapter.run(ids, mask, pos, cache)                                                 # (B, Q, V)
    for i, r in enumerate(reqs):
        _grow(r, cache, i, C)
    return [adapter.own_rows(logits[i, :q[i]]) for i in range(B)]


def batchable(reqs: list[Request]) -> bool:
    """Plain dynamic caches only (a sliding-window layer would need its own layout): else one by one."""
    return all(r.cache is None or all(type(layer) is DynamicLayer for layer in r.cache.layers) for r in reqs)


def run_forwards(adapter, reqs: list[Request]) -> list[torch.Tensor]:
    if len(reqs) == 1 or not batchable(reqs):
        return [adapter.forward(r.ids, r.mask, r.pos, r.cache) for r in reqs]
    forward = {"ragged": ragged.ragged_forward, "packed": packed_forward, "padded": padded_forward}
    return forward[layout(adapter, reqs)](adapter, reqs)


class Lane:
    """Up to ``size`` of the given jobs decoding at once, their forwards run together one round at a time. The
    condition's lock is the baton: a decode's thread holds it while it runs and gives it up only while it waits."""

    def __init__(self, adapter, jobs: list[tuple[int, object]], size: int, on_done=None, clock=None):
        self.adapter, self.jobs, self.taken, self.on_done = adapter, jobs, 0, on_done
        self.clock = clock or Clock()
        self.cv = threading.Condition()
        self.pending: list[Request] = []
        self.active = min(size, len(jobs))        # decodes running: each posts one forward per round
        self.results: dict[int, object] = {}
        self.seconds: dict[int, float] = defaultdict(float)   # each job's share of the lane's time
        self.forwards = 0                         # batched forwards run (one per round)

    def run(self) -> None:
        workers = [threading.Thread(target=self._worker, daemon=True) for _ in range(self.active)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()

    def _worker(self) -> None:
        with self.cv:
            try:
                while self.taken < len(self.jobs):    # a decode that ends hands its place to the next job at once
                    index, job = self.jobs[self.taken]
                    self.taken += 1
                    try:
                        self.results[index] = job(LaneView(self.adapter, self, index))
                    except Exception as e:            # raised by run_batched once every decode has ended
                        self.results[index] = Failed(e)
                        continue
                    if self.on_done is not None:
                        self.on_done(index, self.results[index], self.seconds[index])
            finally:                                  # whatever ends this thread, the others' rounds go on
                self.active -= 1
                self._maybe_run()

    def forward(self, index: int, ids, mask, pos, cache) -> torch.Tensor:
        """Called by a decode holding the baton; returns its logits once its round has run."""
        req = Request(index, ids, mask, pos, cache)
        self.pending.append(req)
        self._maybe_run()
        while req.result is None:
            self.cv.wait()
        if isinstance(req.result, Failed):
            raise req.result.error
        return req.result

    def _maybe_run(self) -> None:
        if not self.pending or len(self.pending) < self.active:
            return
        reqs, self.pending = sorted(self.pending, key=lambda r: r.index), []
        try:
            outs = run_forwards(self.adapter, reqs)
        except Exception as e:                    # every decode of the round sees the failure and raises it
            outs = [Failed(e)] * len(reqs)
        for r, o in zip(reqs, outs):
            r.result = o
        self._share(reqs)
        self.forwards += 1
        self.cv.notify_all()


    def _share(self, reqs: list[Request]) -> None:
        """The time since the last round of any lane (the decodes' rules and this forward) goes to this round's
        decodes in equal parts: a decode's time is its share of the rounds it took part in (a forward's cost is
        mostly shared, not per token, at these sizes), and the shares of a run add up to its wall time."""
        span = self.clock.lap()
        for r in reqs:
            self.seconds[r.index] += span / len(reqs)


class Clock:
    """The end of the last round of any lane: consecutive laps partition a run's wall time."""

    def __init__(self):
        self.lock, self.mark = threading.Lock(), time.perf_counter()

    def lap(self) -> float:
        with self.lock:
            now = time.perf_counter()
            span, self.mark = now - self.mark, now
        return span


@dataclass
class Failed:
    error: Exception


class LaneView:
    """What one decode sees: the model adapter, with ``forward`` going through its lane."""

    def __init__(self, adapter, lane: Lane, index: int):
        self._adapter, self._lane, self._index = adapter, lane, index

    def forward(self, input_ids, mask, position_ids, cache=None):
        return self._lane.forward(self._index, input_ids, mask, position_ids, cache)

    def __getattr__(self, name):
        return getattr(self._adapter, name)


_switch = {"users": 0, "saved": None, "lock": threading.Lock()}


@contextmanager
def short_switch_interval():
    """Python's GIL switch interval at SWITCH_S while any batched run is in progress (it is process-wide)."""
    with _switch["lock"]:
        if _switch["users"] == 0:
            _switch["saved"] = sys.getswitchinterval()
            sys.setswitchinterval(min(SWITCH_S, _switch["saved"]))
        _switch["users"] += 1
    try:
        yield
    finally:
        with _switch["lock"]:
            _switch["users"] -= 1
            if _switch["users"] == 0:
                sys.setswitchinterval(_switch["saved"])


def run_batched(adapter, jobs: list, size: int, seconds: dict | None = None, on_done=None) -> list:
    """``job(adapter_view)`` for every job, with up to ``size`` decodes per forward in each of ``LANES`` lanes
    (alternate jobs); results in job order. A job's exception is raised here once every decode has ended.
    ``seconds`` (a dict) receives each job's share of its lane's time; ``on_done(index, result, seconds)`` is
    called as each job ends (in its lane's thread, holding the lane: keep it short)."""
    clock = Clock()
    lanes = [Lane(adapter, list(enumerate(jobs))[k::LANES], size, on_done, clock) for k in range(LANES)]
    threads = [threading.Thread(target=lane.run, daemon=True) for lane in lanes]
    with short_switch_interval():
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if seconds is not None:
        seconds.update({i: s for lane in lanes for i, s in lane.seconds.items()})
    results = [r for _, r in sorted(kv for lane in lanes for kv in lane.results.items())]
    for r in results:
        if isinstance(r, Failed):
            raise r.error
    return results
