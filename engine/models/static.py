"""Static forwards: a round's forwards over fixed-size buffers, one set per shape bucket, and on a CUDA device one
CUDA graph per bucket (vLLM's model runner is the model: persistent inputs, graphs per batch size, eager past them).

    path = StaticPath.of(adapter)        # None where the static path is off (``enabled``)
    path.run(reqs) -> [logits (q_i, V)]  a round's requests (no cache, or slot caches of one pool), as one by one

A round of B requests whose longest query has q rows runs in the bucket (``b_bucket(B)``, ``q_bucket(q)``): ids,
positions and masks are written into that bucket's host buffers (pinned on a CUDA device) and copied up without
blocking; pad rows hold the pad id at position 0 and see only themselves, so each request's rows are those of its
own forward at the padded shape. A request whose mask is full attention over its own rows (LLaDA's and Dream's
whole-canvas forward) sends no mask at all: the device builds it from its length. Any other mask (block-causal
rows) is copied into the bucket's mask buffer.

On a CUDA device each bucket's forward is captured the first time the bucket is met (two warm-up calls on a side
stream, then the capture, all graphs sharing one memory pool) and replayed from then on: one launch per forward
instead of a dozen per layer. A replay runs the same kernels as an eager call at that shape, so its logits are the
eager logits of the bucket's shape bit for bit (the GPU check asserts tokens equal). The output buffer is
overwritten by the next replay, so each request gets a copy of its rows. At most ``MAX_GRAPHS`` buckets are
captured; later ones run eagerly over their buffers, as does a bucket whose capture would pass the budget or ran
out of device memory (marked ``over_budget``: never captured again). A slot cache's length moves only once the
round's forward and projection succeeded, so a round that runs out of memory is retried from the same lengths
(``engine.runtime.rounds``).

A request with a KV cache runs here when its cache is a slot cache (``engine.models.slots``: each decode's K/V
in a row of a fixed-capacity pool, written in place): the exact block cache and Fast-dLLM's prefix and dual
caches. What does not run here, and why (``reason``; the trace's ``meta.forward_path`` counts both): a request
whose cache is a ``DynamicCache`` (Fast-dLLM v2's sub-blocks keep views of it aside; sliding-window layers keep a
window) and a model whose attention is not sdpa or eager. Those run today's eager path unchanged.

``UNMASK_STATIC``: "auto" (the default: the static path and graphs on a CUDA device, today's path elsewhere),
"on" (the static path on every device: on a CPU it runs eagerly over the buffers, which the tests compare with
today's path), "off". ``UNMASK_CUDA_GRAPHS=0`` keeps the static buffers but never captures (ZeroGPU, where a GPU is
attached per request and a graph would not outlive its lease). ``UNMASK_COMPILE=on`` runs each bucket's forward
compiled once its background compile is done (``engine.models.compiled``; a graph captures the compiled forward).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import torch

from engine.models import compiled, slots
from engine.models.memory import LEDGER
from engine.settings import get

B_BUCKETS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64)
MAX_GRAPHS = 32
# rounds after which a bucket without a pool that no round used is freed (its buffers and graph): a (64, 1280) mask
# is 105 MB; a shape met once (a burst, an odd prompt length) does not keep it for good. A bucket of a pool goes
# with the pool's version instead (``_drop_stale``).
IDLE_ROUNDS = 256


def q_bucket(q: int) -> int:
    """Query rows padded to a multiple of 16 up to 64, then to a multiple of 1/16 of the next power of two (at
    most 12.5 % pad rows): few shapes, little waste."""
    if q <= 64:
        return max(16, -(-q // 16) * 16)
    step = 1 << (q.bit_length() - 4)
    return -(-q // step) * step


def b_bucket(b: int) -> int | None:
    return next((x for x in B_BUCKETS if x >= b), None)


def note_device_memory(device: torch.device) -> None:
    """Give the byte ledger a GPU's memory (``engine.models.memory``: its default budget is a quarter of it)."""
    if device.type == "cuda":
        LEDGER.device_total = torch.cuda.get_device_properties(device).total_memory


def enabled(device) -> tuple[bool, bool]:
    """(static path, CUDA graphs) for a model on ``device``, from ``UNMASK_STATIC`` and ``UNMASK_CUDA_GRAPHS``."""
    mode, cuda = get("UNMASK_STATIC"), torch.device(device).type == "cuda"
    static = mode == "on" or (mode == "auto" and cuda)
    return static, static and cuda and get("UNMASK_CUDA_GRAPHS")


def group(req) -> object:
    """Requests of one group share a static forward: those without a cache, or those of one slot pool."""
    return None if req.cache is None else id(req.cache.pool)


def reason(adapter, req) -> str | None:
    """Why this request cannot run on the static path (None: it can). A round too large for the largest batch
    bucket is split by the caller (``engine.runtime.batch.run_forwards``)."""
    if req.cache is not None and not isinstance(req.cache, (slots.SlotCache, slots.SlotSplice)):
        return "a growing KV cache (DynamicCache)"
    if adapter.attn_impl not in ("sdpa", "eager"):
        return f"attention {adapter.attn_impl}"
    return None


@dataclass(eq=False)
class Bucket:
    """One shape's buffers, host (pinned on a CUDA device) and device, by name; its graph, if any. Without a pool:
    ids, pos (B, Q), lengths (B,), explicit (B,) and mask (B, Q, Q). With a pool (cached requests): ids, pos,
    rows (B,), w_row, w_slot (B, Q) and mask (B, Q, S)."""
    B: int
    Q: int
    pool: object                  # engine.models.slots.SlotPool, or None
    host: dict
    dev: dict
    graph: object = None          # torch.cuda.CUDAGraph
    out: torch.Tensor | None = None   # (B, Q, hidden), the graph's output
    copied: object = None         # torch.cuda.Event after the last copies up: the host buffers are free again
    graph_bytes: int = 0          # the memory its graph holds, sized at capture (``_record``)
    over_budget: bool = False     # its capture would pass UNMASK_STATIC_MB, or ran out of memory: eager
    how: str = "static eager"     # how its last forward ran: "compiled" where engine.models.compiled has it ready
    last: int = 0                 # the path's round that used it last (``StaticPath.free_idle``)

    def dev_bytes(self) -> int:
        """Its device buffers (on a CPU the host buffers are the device's: counted once)."""
        return sum(t.numel() * t.element_size() for t in self.dev.values())


class StaticPath:
    """The static buffers and graphs of one model (``of``: one per adapter, made on first use)."""

    def __init__(self, adapter, graphs: bool):
        self.adapter, self.graphs = adapter, graphs
        self.device = torch.device(adapter.device)
        self.buckets: dict[tuple, Bucket] = {}
        self.pools: dict[int, slots.SlotPool] = {}
        self.pool = torch.cuda.graph_pool_handle() if graphs else None
        self.captured, self.rounds = 0, 0
        # a decode's cache row is taken where its Generation is made (a visitor's thread: ``slot_cache``) while the
        # engine thread runs rounds over the same pools: one at a time, or two decodes of a class that arrive
        # together grow a pool at once and get one row (each then reads the other's K/V), and a pool that grows
        # under a running forward loses the K/V that forward writes into its old tensors
        self.lock = threading.RLock()
        note_device_memory(self.device)
        self.head = adapter.model.get_output_embeddings()      # projected outside the graph: ``_call``
        LEDGER.track("pools", self, lambda p: sum(x.bytes() for x in list(p.pools.values()) if x.rows))
        LEDGER.track("graphs", self, lambda p: sum(bk.graph_bytes for bk in list(p.buckets.values())))
        LEDGER.track("buckets", self, lambda p: sum(bk.dev_bytes() for bk in list(p.buckets.values())))

    @property
    def budget(self) -> float:
        return LEDGER.budget()

    @property
    def compiled(self) -> "compiled.Compiled | None":
        """The model's compiled forward (None: eager), asked each round: UNMASK_COMPILE may change between runs."""
        return compiled.Compiled.of(self.adapter)

    @classmethod
    def of(cls, adapter) -> "StaticPath | None":
        static, graphs = enabled(adapter.device)
        if not static and not compiled.decide(adapter)[0]:     # a compiled forward brings the buckets it compiles
            return None
        path = adapter.__dict__.get("_static")
        if path is None or path.graphs != graphs:
            path = adapter.__dict__["_static"] = cls(adapter, graphs)
        return path

    def slot_cache(self, need: int) -> "slots.SlotCache | None":
        """A decode's KV cache of at least ``need`` positions in this model's pool (None: the model keeps a
        ``DynamicCache``, ``slots.eligible``)."""
        if not slots.eligible(self.adapter):
            return None
        with self.lock:
            return self._slot_cache(slots.capacity(need))

    def _slot_cache(self, S: int) -> "slots.SlotCache | None":
        for other in [k for k, p in self.pools.items() if p.idle and k != S]:   # a pool nobody holds a row of goes
            self._drop_stale(self.pools.pop(other), every=True)                # (this capacity's stays warm)
        pool = self.pools.get(S) or slots.SlotPool(self.adapter, S)
        grown = pool.bytes(max(1, 2 * pool.rows)) - (pool.bytes() if pool.rows else 0) if not pool.free else 0
        if self.used_bytes() + grown > self.budget:
            return None                                  # past the budget: this decode keeps a dynamic cache
        pool.before_grow = lambda p: self._drop_stale(p, every=True)
        self.pools[S] = pool
        return slots.SlotCache(pool)

    def used_bytes(self) -> int:
        """Everything the byte ledger counts (``engine.models.memory``): this path's pools, graphs and buffers,
        the decodes' kept bytes and the running round's, other models' included (one device, one budget)."""
        return LEDGER.used()

    def free_idle(self, keep: "Bucket | None" = None) -> None:
        """Free the buckets without a pool that no round used for ``IDLE_ROUNDS`` rounds and, while the ledger is
        past its budget, the least recently used of the others (never ``keep``, the round's own)."""
        plain = sorted((k for k, bk in self.buckets.items() if bk.pool is None and bk is not keep),
                       key=lambda k: self.buckets[k].last)
        over = self.budget < float("inf") and LEDGER.used() > self.budget      # the ledger read once, then per drop
        for k in plain:
            if self.rounds - self.buckets[k].last > IDLE_ROUNDS or over:
                self.captured -= self.buckets.pop(k).graph is not None
                over = over and LEDGER.used() > self.budget

    @torch.no_grad()
    def run(self, reqs) -> tuple[list[torch.Tensor], str]:
        """Every request's logits (q_i, V), as ``adapter.forward`` gives them one by one, and how they ran. The
        requests share one pool, or none has a cache. No cache is made (no pool grows) meanwhile: ``lock``."""
        with self.lock:
            return self._run(reqs)

    def _run(self, reqs) -> tuple[list[torch.Tensor], str]:
        q = [len(r.ids) for r in reqs]
        pool = reqs[0].cache.pool if reqs[0].cache is not None else None
        bk = self._bucket(b_bucket(len(reqs)), q_bucket(max(q)), pool)
        self.rounds += 1
        bk.last = self.rounds
        self.free_idle(keep=bk)
        self._fill(bk, reqs, q)
        settled = self.compiled is None or self.compiled.settled(self._key(bk))    # capture the compiled forward
        if bk.graph is None and self.graphs and self.captured < MAX_GRAPHS and settled and not bk.over_budget:
            self._capture(bk)
        if bk.graph is not None:
            bk.graph.replay()
            out, how = bk.out, "compiled cuda graph" if bk.how == "compiled" else "cuda graph"
        else:
            out = self._call(bk)
            how = bk.how
        # the output projection per request, outside the graph: the graph keeps (B, Q, hidden), not (B, Q, V)
        logits = [self.adapter.own_rows(self.head(out[i, :n]).float()) for i, n in enumerate(q)]
        for r, n in zip(reqs, q):       # only once every allocation above succeeded: a forward or projection that
            if isinstance(r.cache, slots.SlotCache):                 # raised leaves the lengths as they were (the
                r.cache.length += n     # K/V it wrote past them are unread); appended at [length, length + n)
        return logits, how

    def _bucket(self, B: int, Q: int, pool) -> Bucket:
        key = (B, Q) if pool is None else (B, Q, id(pool), pool.version)
        bk = self.buckets.get(key)
        if bk is None:
            self._drop_stale(pool)
            K = Q if pool is None else pool.S
            shapes = dict(ids=((B, Q), torch.long), pos=((B, Q), torch.long), mask=((B, Q, K), torch.bool))
            shapes.update(dict(lengths=((B,), torch.long), explicit=((B,), torch.bool)) if pool is None else dict(
                rows=((B,), torch.long), w_row=((B, Q), torch.long), w_slot=((B, Q), torch.long)))
            pin = self.device.type == "cuda"
            host = {k: torch.zeros(s, dtype=d, pin_memory=pin) for k, (s, d) in shapes.items()}
            dev = {k: (v.to(self.device) if pin else v) for k, v in host.items()}
            bk = self.buckets[key] = Bucket(B, Q, pool, host, dev)
        return bk

    def _drop_stale(self, pool, every: bool = False) -> None:
        """A pool that grew holds new tensors: the buckets (and graphs) of its older versions go (``every``: all of
        its buckets, before it grows or when it goes)."""
        if pool is None:
            return
        for key in [k for k in self.buckets if len(k) == 4 and k[2] == id(pool) and (every or k[3] != pool.version)]:
            self.captured -= self.buckets.pop(key).graph is not None

    def _fill(self, bk: Bucket, reqs, q: list[int]) -> None:
        """The round's ids, positions and masks into the bucket's host buffers (numpy), then up to the device
        without a blocking wait (the round's statistics copy waits for everything before it)."""
        if bk.copied is not None:
            bk.copied.synchronize()          # the last round's copies have read the pinned buffers (a no-op after
        h = {k: v.numpy() for k, v in bk.host.items()}      # the statistics' copy, which waited for them already)
        h["ids"][:] = self.adapter.tokenizer.pad_token_id or 0
        h["pos"][:] = 0
        for i, r in enumerate(reqs):
            h["ids"][i, :q[i]], h["pos"][i, :q[i]] = np.asarray(r.ids), np.asarray(r.pos)
        sent = fill_plain(h, reqs, q, bk.Q) if bk.pool is None else fill_slots(h, reqs, q, bk.pool)
        if self.device.type != "cpu":                              # on a CPU the host buffers are the device's
            for k in sent:
                bk.dev[k].copy_(bk.host[k], non_blocking=True)
            bk.copied = torch.cuda.Event()
            bk.copied.record()

    def _call(self, bk: Bucket) -> torch.Tensor:
        """The model's layers over the bucket's device buffers: what a graph captures. (B, Q, hidden) in the model's
        dtype: the output projection runs per request after it (``run``), so a graph's output is 30x smaller than
        its logits would be at LLaDA's width."""
        a, d = self.adapter, bk.dev
        if bk.pool is None:
            rows = torch.arange(bk.Q, device=self.device)
            inside = rows[None, :] < d["lengths"][:, None]                                    # (B, Q)
            full = (inside[:, :, None] & inside[:, None, :]) | torch.eye(bk.Q, dtype=torch.bool, device=self.device)
            mask, kw = torch.where(d["explicit"][:, None, None], d["mask"], full), dict(use_cache=False)
        else:
            cache = slots.RoundSlots(bk.pool, d["rows"], d["w_row"], d["w_slot"])
            mask, kw = d["mask"], {a._cache_kw: cache, "use_cache": True}
        mask = mask[:, None]                                                                  # (B, 1, Q, K)
        if a.attn_impl == "eager":
            mask = torch.zeros((), dtype=a.dtype, device=self.device).masked_fill(~mask, torch.finfo(a.dtype).min)
        comp = self.compiled
        model, bk.how = (a.model.get_decoder(), "static eager") if comp is None else comp.model_for(self._key(bk))
        return model(input_ids=d["ids"], attention_mask=mask, position_ids=d["pos"], **kw).last_hidden_state

    @staticmethod
    def _key(bk: Bucket) -> tuple:
        # the compiled code's key: the shapes (a pool's rows are dynamic), never a pool's identity, since a pool
        # nobody holds goes and the next of its capacity is a new object that the same code serves
        return (bk.B, bk.Q) if bk.pool is None else (bk.B, bk.Q, bk.pool.S)

    def _capture(self, bk: Bucket) -> None:
        """Capture the bucket's forward (``_record``), unless that would pass the budget; a capture that runs out of
        device memory marks the bucket over budget too. Either way it then runs eagerly over its buffers, and no
        later round tries to capture it again."""
        hidden = self.adapter.model.config.get_text_config().hidden_size
        if self.used_bytes() + bk.B * bk.Q * hidden * self.adapter.dtype.itemsize > self.budget:   # its output
            bk.over_budget = True
            return
        try:
            with compiled.exclusive() as mine:         # never while a compile runs: CUDA refuses it mid-capture
                if not mine:
                    return                             # this round runs eagerly; a later one captures
                self._record(bk)
        except torch.OutOfMemoryError as e:
            bk.graph, bk.out, bk.over_budget = None, None, True
            compiled.log(f"{self.adapter.name}'s bucket {(bk.B, bk.Q)} ran out of device memory in its capture: it "
                         f"runs eagerly from now on ({' '.join(str(e).split())[:200]})")
        if bk.over_budget and self.device.type == "cuda":
            torch.cuda.empty_cache()           # what the failed capture held, before this round's eager forward

    def _record(self, bk: Bucket) -> None:
        """Warm the bucket's shape up on a side stream, then capture its forward into the shared pool."""
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(2):
                self._call(bk)
        torch.cuda.current_stream(self.device).wait_stream(side)
        before = torch.cuda.memory_allocated(self.device)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            bk.out = self._call(bk)
        # sized at capture: the bytes the capture left allocated (its output and what the graph's pool holds), at
        # least its output (a recapture into memory the pool already reserved still holds that much)
        out = bk.out.numel() * bk.out.element_size()
        bk.graph, bk.graph_bytes = graph, max(out, torch.cuda.memory_allocated(self.device) - before)
        self.captured += 1


def fill_plain(h: dict, reqs, q: list[int], Q: int) -> tuple[str, ...]:
    """Requests without a cache: lengths, and the masks that are not full attention over their rows (those the
    device builds from the lengths). The names of the buffers to send."""
    h["lengths"][:] = 0
    h["lengths"][:len(reqs)] = q
    explicit = h["explicit"]
    explicit[:] = False
    for i, r in enumerate(reqs):
        m = np.asarray(r.mask, dtype=bool)
        if not m.all():
            assert m.any(-1).all(), "a fully masked attention row gives NaN"
            h["mask"][i] = np.eye(Q, dtype=bool)                    # pad rows see themselves
            h["mask"][i, :q[i], :q[i]] = m
            explicit[i] = True
    return ("ids", "pos", "lengths", "explicit") + (("mask",) if explicit.any() else ())


def fill_slots(h: dict, reqs, q: list[int], pool) -> tuple[str, ...]:
    """Requests with a slot cache: each query's K/V slot (its row, ``length + j``; a splice's ``a + j``) and its
    mask over the row's S positions, as the engine's mask (q, c + q) numbers them (cache columns, then the
    queries'). Pad rows and pad requests write into the dummy row and see slot 0 (a finite, unread output)."""
    B, Q = h["ids"].shape
    h["rows"][:] = pool.dummy
    h["w_row"][:] = pool.dummy
    h["w_slot"][:] = np.minimum(np.arange(Q), pool.S - 1)
    mask = h["mask"]
    mask[:] = False
    mask[:, :, 0] = True
    for i, r in enumerate(reqs):
        c, n, cache = r.cache.get_seq_length(), q[i], r.cache
        m = np.asarray(r.mask, dtype=bool)
        assert m.any(-1).all(), "a fully masked attention row gives NaN"
        first = cache.a if isinstance(cache, slots.SlotSplice) else c
        h["rows"][i], h["w_row"][i, :n], h["w_slot"][i, :n] = cache.row, cache.row, first + np.arange(n)
        if isinstance(cache, slots.SlotSplice):
            assert m.all(), "a dual-cache forward sees every position"
            mask[i, :n, :cache.cache.length] = True
        else:
            mask[i, :n, :c + n] = m
    return "ids", "pos", "rows", "w_row", "w_slot", "mask"
