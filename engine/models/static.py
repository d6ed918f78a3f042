"""Static forwards: a round's forwards over fixed-size buffers, one set per shape bucket, and on a CUDA device one
CUDA graph per bucket (vLLM's model runner is the model: persistent inputs, graphs per batch size, eager past them).

    path = StaticPath.of(adapter)        # None where the static path is off (``enabled``)
    path.run(reqs) -> [logits (q_i, V)]  a round's requests without a cache, as ``adapter.forward`` gives them

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
captured; later ones run eagerly over their buffers.

What does not run here, and why (``reason``; the trace's ``meta.forward_path`` counts both): a request that carries
a KV cache (its K/V live in a ``DynamicCache`` that grows by concatenation, which a graph cannot hold) and a model
whose attention is not sdpa or eager. Those run today's eager path unchanged.

``UNMASK_STATIC``: "auto" (the default: the static path and graphs on a CUDA device, today's path elsewhere),
"on" (the static path on every device: on a CPU it runs eagerly over the buffers, which the tests compare with
today's path), "off". ``UNMASK_CUDA_GRAPHS=0`` keeps the static buffers but never captures (ZeroGPU, where a GPU is
attached per request and a graph would not outlive its lease).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from engine.settings import get

B_BUCKETS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64)
MAX_GRAPHS = 32


def q_bucket(q: int) -> int:
    """Query rows padded to a multiple of 16 up to 64, then to 1/16 of the next power of two (at most 12.5 % pad
    rows): few shapes, little waste."""
    if q <= 64:
        return max(16, -(-q // 16) * 16)
    step = 1 << (q.bit_length() - 4)
    return -(-q // step) * step


def b_bucket(b: int) -> int | None:
    return next((x for x in B_BUCKETS if x >= b), None)


def enabled(device) -> tuple[bool, bool]:
    """(static path, CUDA graphs) for a model on ``device``, from ``UNMASK_STATIC`` and ``UNMASK_CUDA_GRAPHS``."""
    mode, cuda = get("UNMASK_STATIC"), torch.device(device).type == "cuda"
    static = mode == "on" or (mode == "auto" and cuda)
    return static, static and cuda and get("UNMASK_CUDA_GRAPHS")


def reason(adapter, reqs) -> str | None:
    """Why this round cannot run on the static path (None: it can)."""
    if any(r.cache is not None for r in reqs):
        return "a KV cache (DynamicCache)"
    if adapter.attn_impl not in ("sdpa", "eager"):
        return f"attention {adapter.attn_impl}"
    if b_bucket(len(reqs)) is None:
        return f"batch {len(reqs)} > {B_BUCKETS[-1]}"
    return None


@dataclass(eq=False)
class Bucket:
    """One shape's buffers: host (numpy views of pinned memory on a CUDA device) and device; its graph, if any."""
    B: int
    Q: int
    ids: torch.Tensor             # (B, Q) long, device
    pos: torch.Tensor             # (B, Q) long
    lengths: torch.Tensor         # (B,) long: each request's real rows
    explicit: torch.Tensor        # (B,) bool: its mask is in ``mask``, else full attention over its rows
    mask: torch.Tensor            # (B, Q, Q) bool
    host: dict                    # the same names -> host tensors
    graph: object = None          # torch.cuda.CUDAGraph
    out: torch.Tensor | None = None   # (B, Q, V) float32, the graph's output


class StaticPath:
    """The static buffers and graphs of one model (``of``: one per adapter, made on first use)."""

    def __init__(self, adapter, graphs: bool):
        self.adapter, self.graphs = adapter, graphs
        self.device = torch.device(adapter.device)
        self.buckets: dict[tuple[int, int], Bucket] = {}
        self.pool = torch.cuda.graph_pool_handle() if graphs else None
        self.captured = 0

    @classmethod
    def of(cls, adapter) -> "StaticPath | None":
        static, graphs = enabled(adapter.device)
        if not static:
            return None
        path = adapter.__dict__.get("_static")
        if path is None or path.graphs != graphs:
            path = adapter.__dict__["_static"] = cls(adapter, graphs)
        return path

    @torch.no_grad()
    def run(self, reqs) -> tuple[list[torch.Tensor], str]:
        """Every request's logits (q_i, V), as ``adapter.forward`` gives them one by one, and how they ran."""
        q = [len(r.ids) for r in reqs]
        bk = self._bucket(b_bucket(len(reqs)), q_bucket(max(q)))
        self._fill(bk, reqs, q)
        if bk.graph is None and self.graphs and self.captured < MAX_GRAPHS:
            self._capture(bk)
        if bk.graph is not None:
            bk.graph.replay()
            out, how = bk.out, "cuda graph"
        else:
            out, how = self._call(bk), "static eager"
        return [self.adapter.own_rows(out[i, :n].clone()) for i, n in enumerate(q)], how

    def _bucket(self, B: int, Q: int) -> Bucket:
        bk = self.buckets.get((B, Q))
        if bk is None:
            pin = self.device.type == "cuda"
            host = {k: torch.zeros(s, dtype=d, pin_memory=pin) for k, s, d in (
                ("ids", (B, Q), torch.long), ("pos", (B, Q), torch.long), ("lengths", (B,), torch.long),
                ("explicit", (B,), torch.bool), ("mask", (B, Q, Q), torch.bool))}
            dev = {k: (v.to(self.device) if pin else v) for k, v in host.items()}
            bk = self.buckets[(B, Q)] = Bucket(B, Q, host=host, **dev)
        return bk

    def _fill(self, bk: Bucket, reqs, q: list[int]) -> None:
        """The round's ids, positions, lengths and explicit masks into the bucket's host buffers (numpy), then up
        to the device without a blocking wait (the round's statistics copy waits for everything before it)."""
        h = {k: v.numpy() for k, v in bk.host.items()}
        h["ids"][:] = self.adapter.tokenizer.pad_token_id or 0
        h["pos"][:] = 0
        h["lengths"][:] = 0
        h["lengths"][:len(reqs)] = q
        explicit = h["explicit"]
        explicit[:] = False
        for i, r in enumerate(reqs):
            h["ids"][i, :q[i]], h["pos"][i, :q[i]] = np.asarray(r.ids), np.asarray(r.pos)
            m = np.asarray(r.mask, dtype=bool)
            if not m.all():
                assert m.any(-1).all(), "a fully masked attention row gives NaN"
                h["mask"][i] = np.eye(bk.Q, dtype=bool)            # pad rows see themselves
                h["mask"][i, :q[i], :q[i]] = m
                explicit[i] = True
        if self.device.type == "cpu":
            return                                                  # the host buffers are the device's
        names = ("ids", "pos", "lengths", "explicit") + (("mask",) if explicit.any() else ())
        for k in names:
            getattr(bk, k).copy_(bk.host[k], non_blocking=True)

    def _call(self, bk: Bucket) -> torch.Tensor:
        """The model over the bucket's device buffers: what a graph captures. (B, Q, V) float32."""
        a = self.adapter
        rows = torch.arange(bk.Q, device=self.device)
        inside = rows[None, :] < bk.lengths[:, None]                                        # (B, Q)
        full = (inside[:, :, None] & inside[:, None, :]) | torch.eye(bk.Q, dtype=torch.bool, device=self.device)
        mask = torch.where(bk.explicit[:, None, None], bk.mask, full)[:, None]             # (B, 1, Q, Q)
        if a.attn_impl == "eager":
            mask = torch.zeros((), dtype=a.dtype, device=self.device).masked_fill(~mask, torch.finfo(a.dtype).min)
        out = a.model(input_ids=bk.ids, attention_mask=mask, position_ids=bk.pos, use_cache=False)
        return out.logits.float()

    def _capture(self, bk: Bucket) -> None:
        """Warm the bucket's shape up on a side stream, then capture its forward into the shared pool."""
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(2):
                self._call(bk)
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            bk.out = self._call(bk)
        bk.graph = graph
        self.captured += 1
