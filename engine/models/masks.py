"""Attention-mask builders: pure functions returning bool (q, kv) matrices, True = may attend.

The builders work on numpy arrays (and the position-based ones on torch tensors too), so the explorer can draw
exactly the masks the engine uses without importing torch. Every pattern keeps the diagonal (a query always sees
itself), so no row is fully masked. ``to_backend`` turns a bool matrix into the (1, 1, q, kv) tensor the stock
transformers classes take as-is: bool for sdpa, additive 0 / dtype-min for eager (a bool mask is silently wrong
under eager: it adds 0/1 to the scores).
"""

from __future__ import annotations

import numpy as np


def block_causal(q_pos, k_pos, block_size: int):
    """Key visible iff its block (pos // B) is not after the query's block. (q,), (kv,) -> (q, kv)."""
    return (k_pos[None, :] // block_size) <= (q_pos[:, None] // block_size)


def causal(q_pos, k_pos):
    """Token-causal (block size 1)."""
    return k_pos[None, :] <= q_pos[:, None]


def verifier_2l(cache_len: int, L: int) -> np.ndarray:
    """S2D2's verifier mask over [cache | y_1..y_L | MASK x L]; shape (2L, cache_len + 2L).

        first half  : [ 1 | A_L     | 0 ]   AR-mode states of the draft-filled block
        second half : [ 1 | A_L - I | I ]   mask at i sees the cache, drafts < i and itself = block-size-1 query
    """
    A = np.tril(np.ones((L, L), bool))
    eye = np.eye(L, dtype=bool)
    inner = np.block([[A, np.zeros((L, L), bool)], [A & ~eye, eye]])
    return np.concatenate([np.ones((2 * L, cache_len), bool), inner], 1)


def partial_causal_draft(cache_len: int, L: int, first_masked: int) -> np.ndarray:
    """S2D2 ``draft_ver``: rows before the first masked index are token-causal, later rows see the whole block."""
    blk = np.ones((L, L), bool)
    rows = np.arange(L) < first_masked
    blk[rows] = np.tril(np.ones((L, L), bool))[rows]
    return np.concatenate([np.ones((L, cache_len), bool), blk], 1)


def simsd_temporal(cache_len: int, n_known: int, steps) -> np.ndarray:
    """SimSD's temporal mask over [cache | leftover (n_known) | drafts D (n) | mask copies M (n)].

    ``steps`` (n,) holds each draft token's reveal step t (1-based). D_i sees D_j iff t_j <= t_i and M_j iff
    t_j > t_i (the block just after step t_i); M_i sees D_j iff t_j < t_i and M_j iff t_j >= t_i (the block just
    before step t_i, so its logit is the target's prediction at the step the draft revealed i). Leftover rows see
    only the leftover; every row sees the cache and the leftover.
    """
    t = np.asarray(steps)
    n = len(t)
    q = n_known + 2 * n
    m = np.zeros((q, cache_len + q), bool)
    m[:, :cache_len + n_known] = True
    m[:n_known, cache_len + n_known:] = False
    d0, m0 = cache_len + n_known, cache_len + n_known + n
    m[n_known:n_known + n, d0:m0] = t[None, :] <= t[:, None]
    m[n_known:n_known + n, m0:] = t[None, :] > t[:, None]
    m[n_known + n:, d0:m0] = t[None, :] < t[:, None]
    m[n_known + n:, m0:] = t[None, :] >= t[:, None]
    return m


def simsd_simplified(cache_len: int, n_known: int, n: int) -> np.ndarray:
    """A simpler reading of SimSD's mask (an early write-up's description, kept to compare with the released one), over the same layout as ``simsd_temporal``: reference tokens
    are mutually invisible, current (mask-copy) tokens see every reference token, references never see current
    tokens; each copy sees itself. A copy sees its own slot's draft token, so acceptance is inflated: this variant
    exists to show the difference against the released rule."""
    q = n_known + 2 * n
    m = np.zeros((q, cache_len + q), bool)
    m[:, :cache_len + n_known] = True
    m[:n_known, cache_len + n_known:] = False
    d0, m0 = cache_len + n_known, cache_len + n_known + n
    m[n_known:n_known + n, d0:m0] = np.eye(n, dtype=bool)
    m[n_known + n:, d0:m0] = True
    m[n_known + n:, m0:] = np.eye(n, dtype=bool)
    return m


def to_backend(mask, attn_impl: str, dtype, device):
    """(q, kv) or (B, q, kv) bool (numpy or torch) -> (1 or B, 1, q, kv) torch tensor in the form the attention
    backend needs."""
    import torch

    m = torch.as_tensor(mask, dtype=torch.bool)                     # built on the host
    assert m.numpy().any(-1).all(), "a fully masked attention row gives NaN"   # numpy's: 8x torch's bool any
    m = m.to(device)[None, None] if m.dim() == 2 else m.to(device)[:, None]
    if attn_impl == "eager":
        zero, low = (torch.tensor(v, dtype=dtype, device=device) for v in (0.0, torch.finfo(dtype).min))
        return torch.where(m, zero, low)
    return m
