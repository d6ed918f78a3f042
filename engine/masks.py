"""Attention-mask builders: pure functions returning bool (q, kv) matrices, True = may attend.

Every pattern here keeps the diagonal (a query always sees itself), so no row is fully masked. ``to_backend``
turns a bool matrix into the (1, 1, q, kv) tensor the stock transformers classes take as-is: bool for sdpa,
additive 0 / dtype-min for eager (a bool mask is silently wrong under eager: it adds 0/1 to the scores).
"""

from __future__ import annotations

import torch


def block_causal(q_pos: torch.Tensor, k_pos: torch.Tensor, block_size: int) -> torch.Tensor:
    """Key visible iff its block (pos // B) is not after the query's block. (q,), (kv,) -> (q, kv)."""
    return (k_pos[None, :] // block_size) <= (q_pos[:, None] // block_size)


def causal(q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
    """Token-causal (block size 1)."""
    return k_pos[None, :] <= q_pos[:, None]


def full(q: int, kv: int) -> torch.Tensor:
    return torch.ones(q, kv, dtype=torch.bool)


def verifier_2l(cache_len: int, L: int) -> torch.Tensor:
    """S2D2's verifier mask over [cache | y_1..y_L | MASK x L]; shape (2L, cache_len + 2L).

        first half  : [ 1 | A_L     | 0 ]   AR-mode states of the draft-filled block
        second half : [ 1 | A_L - I | I ]   mask at i sees the cache, drafts < i and itself = block-size-1 query
    """
    A = torch.ones(L, L, dtype=torch.bool).tril()
    eye = torch.eye(L, dtype=torch.bool)
    top = torch.cat([A, torch.zeros(L, L, dtype=torch.bool)], 1)
    bottom = torch.cat([A & ~eye, eye], 1)
    return torch.cat([torch.ones(2 * L, cache_len, dtype=torch.bool), torch.cat([top, bottom], 0)], 1)


def partial_causal_draft(cache_len: int, L: int, first_masked: int) -> torch.Tensor:
    """S2D2 ``draft_ver``: rows before the first masked index are token-causal, later rows see the whole block."""
    blk = torch.ones(L, L, dtype=torch.bool)
    rows = torch.arange(L)
    causal_rows = rows < first_masked
    blk[causal_rows] = torch.ones(L, L, dtype=torch.bool).tril()[causal_rows]
    return torch.cat([torch.ones(L, cache_len, dtype=torch.bool), blk], 1)


def to_backend(mask: torch.Tensor, attn_impl: str, dtype: torch.dtype, device) -> torch.Tensor:
    """(q, kv) bool -> (1, 1, q, kv) in the form the attention backend needs."""
    assert mask.any(-1).all(), "a fully masked attention row gives NaN"
    m = mask.to(device)[None, None]
    if attn_impl == "eager":
        return torch.zeros(m.shape, dtype=dtype, device=device).masked_fill(~m, torch.finfo(dtype).min)
    return m
