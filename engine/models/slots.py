"""A KV cache of fixed capacity per running decode: its slot in a pool of static tensors, written in place (vLLM's
KV blocks and transformers' ``StaticCache`` are the models), so that a cached forward can run on the static path
(``engine.models.static``) and be captured in a CUDA graph.

    pool = SlotPool(adapter, S)           per model and capacity bucket S: keys[ell], values[ell] (R + 1, H, S, D)
    cache = SlotCache(pool)               one decode's row; ``length`` K/V positions are valid, on the host
    cache.crop(-k)                        roll back: an integer, nothing moves
    cache.splice(a, b)                    Fast-dLLM's dual cache: the queries' K/V replace [a, b) in place

A forward on the static path writes each query's K/V at its slot (the decode's row, ``length + j``; a splice's
rows at ``a + j``), then attends over the whole row, masked to what the engine's mask allows: so the keys a query
sees are the ones a ``DynamicCache`` would hand it, in the same order (``SlotCache`` columns are positions in the
cache, as the engine's masks number them). Pad rows write into the pool's last row, which no real query reads.
The pool grows by doubling its rows (the running set grew); its graphs are captured again then (``version``).
A row goes back to the pool when its cache is garbage-collected (a finished or abandoned decode).
"""

from __future__ import annotations

import weakref

import torch


def eligible(adapter) -> bool:
    """Plain full-attention layers only (a sliding-window layer keeps a window, not a prefix)."""
    cfg = adapter.model.config.get_text_config()
    types = getattr(cfg, "layer_types", None) or ["full_attention"]
    return all(t == "full_attention" for t in types) and adapter.attention != "canvas"


def capacity(n: int) -> int:
    """A pool's positions per row: the decode's need rounded up to a multiple of 256."""
    return -(-n // 256) * 256


class SlotPool:
    """The K/V rows of one model at one capacity ``S``; row ``R`` (the last) takes pad rows' writes."""

    def __init__(self, adapter, S: int):
        cfg = adapter.model.config.get_text_config()
        self.layers, self.S, self.device = cfg.num_hidden_layers, S, torch.device(adapter.device)
        self.heads = cfg.num_key_value_heads
        self.dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        rope32 = "rope32" in str(adapter.model.config._attn_implementation)
        self.key_dtype = torch.float32 if rope32 else adapter.dtype    # LLaDA's keys enter the cache in fp32
        self.value_dtype = adapter.dtype
        self.rows, self.free, self.version = 0, [], 0
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []

    @property
    def dummy(self) -> int:
        return self.rows

    def bytes(self, rows: int | None = None) -> int:
        """The pool's K/V memory at ``rows`` rows (default: now), the pad row included."""
        per = (self.heads * self.S * self.dim * self.layers)
        n = (self.rows if rows is None else rows) + 1
        return n * per * (torch.finfo(self.key_dtype).bits + torch.finfo(self.value_dtype).bits) // 8

    def row_bytes(self) -> int:
        """One row's K/V: what a decode holding it keeps (a paused one too: ``engine.runtime.share.held_bytes``)."""
        return self.bytes(1) - self.bytes(0)

    @property
    def idle(self) -> bool:
        """No decode holds a row."""
        return len(self.free) == self.rows

    def acquire(self) -> int:
        if not self.free:
            self._grow()
        return self.free.pop()

    def release(self, row: int) -> None:
        self.free.append(row)

    def _grow(self) -> None:
        """Twice the rows (at least one), the old rows copied: a new version, whose graphs are captured anew. One
        layer at a time, each old tensor let go once copied (``before_grow`` first drops the graphs that hold
        them), so the peak is the old pool and one new layer, not the old pool and the whole new one."""
        self.before_grow(self)
        old, new = self.rows, max(1, 2 * self.rows)
        for tensors, dt in ((self.keys, self.key_dtype), (self.values, self.value_dtype)):
            for ell in range(self.layers):
                t = torch.zeros((new + 1, self.heads, self.S, self.dim), dtype=dt, device=self.device)
                if ell < len(tensors):
                    t[:old] = tensors[ell][:old]
                    tensors[ell] = t
                else:
                    tensors.append(t)
        self.rows = new
        # in place, in one step: a finished decode's row comes back from whatever thread collects its cache
        self.free[:0] = range(new - 1, old - 1, -1)
        self.version += 1

    @staticmethod
    def before_grow(pool) -> None:
        """Set by the static path: drop what holds the pool's tensors (its graphs)."""


class SlotCache:
    """One decode's K/V: row ``row`` of ``pool``, positions [0, length) valid. What the runners ask of a cache
    (``get_seq_length``, ``crop``) is integer work; ``splice`` stands for Fast-dLLM's dual cache."""
    layers: list = []                     # no per-layer tensors: a retried round restores ``length`` (runtime.cache)

    def __init__(self, pool: SlotPool):
        self.pool, self.row, self.length = pool, pool.acquire(), 0
        self.write_at: int | None = None  # a splice's first slot (None: append at ``length``)
        weakref.finalize(self, pool.release, self.row)

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.length

    def crop(self, n: int) -> None:
        assert n < 0, "crop(-k) only, as engine.runtime.cache.BlockCache calls it"
        self.length = max(0, self.length + n)

    def splice(self, a: int, b: int) -> "SlotSplice":
        return SlotSplice(self, a, b)


class SlotSplice:
    """A forward over rows [a, b) whose K/V replace the cache's [a, b) for that forward: they see the cache's
    [0, length) with their own in place (Fast-dLLM's ``replace_position``). ``get_seq_length`` is what the engine's
    mask numbers as cache columns (the keys besides the queries' own)."""
    layers: list = []

    def __init__(self, cache: SlotCache, a: int, b: int):
        self.cache, self.a, self.b = cache, a, b
        self.pool, self.row = cache.pool, cache.row

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.cache.length - (self.b - self.a)


class RoundSlots:
    """The cache a static forward hands the model: each layer's ``update`` writes the round's K/V at their slots
    and returns every request's whole row, (B, H, S, D), for attention under the round's mask."""

    def __init__(self, pool: SlotPool, rows: torch.Tensor, w_row: torch.Tensor, w_slot: torch.Tensor):
        self.pool, self.rows, self.w_row, self.w_slot = pool, rows, w_row, w_slot    # (B,), (B, Q), (B, Q)

    def update(self, key_states, value_states, layer_idx: int, *args, **kwargs):
        K, V = self.pool.keys[layer_idx], self.pool.values[layer_idx]                  # (R + 1, H, S, D)
        K[self.w_row, :, self.w_slot] = key_states.transpose(1, 2).to(K.dtype)         # (B, Q, H, D)
        V[self.w_row, :, self.w_slot] = value_states.transpose(1, 2).to(V.dtype)
        return K.index_select(0, self.rows), V.index_select(0, self.rows)

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return 0                            # the model numbers positions from position_ids, never from here


def overflow(cache, n: int) -> str | None:
    """Why ``n`` more queries do not fit ``cache``'s row (a ``SlotCache`` or a ``SlotSplice``), or None. Checked
    before the request is sent: on a GPU the write past the row would be a device-side assert, ending the process."""
    if isinstance(cache, SlotSplice):
        first, S = cache.a, cache.cache.pool.S
    elif isinstance(cache, SlotCache):
        first, S = cache.length, cache.pool.S
    else:
        return None
    if first + n <= S:
        return None
    return f"this decode needs K/V positions up to {first + n}, but its cache row holds {S}"
