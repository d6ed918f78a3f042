"""Generate loops written outside Unmask, as researchers write them, for the recorder's tests: Fast-dLLM's threshold
loop with a prefix cache (a full-attention model, called directly: offsets from the cache's length) and a ReMDM
sampler that re-masks (the embedded block-causal model, whole-canvas forwards). Each computes its own confidences
and commits from the logits; the recorder only watches."""

from __future__ import annotations

import torch

from engine.models import masks


def _conf(logits: torch.Tensor, mask_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(q, V) -> the argmax and its probability, [MASK] never predicted, in float64 (Fast-dLLM's cast)."""
    z = logits.double()
    z[:, mask_id] = float("-inf")
    p = torch.softmax(z, -1)
    x0 = p.argmax(-1)
    return x0, p.gather(-1, x0[:, None])[:, 0]


def ones(a, q: int, kv: int):
    return masks.to_backend(torch.ones(q, kv, dtype=torch.bool), a.attn_impl, a.dtype, a.device)


@torch.no_grad()
def threshold_prefix(a, prompt_ids: list[int], gen_length: int, block_length: int, tau: float) -> torch.Tensor:
    """Fast-dLLM's ``generate_with_prefix_cache`` at threshold τ: per block a whole-canvas forward that keeps the
    K/V, cut back to the block's start; then forwards of [block start, end) against that prefix until the block is
    full. Each commits the most confident masked slot and every one at or above τ. No position_ids are passed: the
    model counts from its cache."""
    x = torch.tensor([prompt_ids + [a.mask_token_id] * gen_length])
    P, n, m = len(prompt_ids), len(prompt_ids) + gen_length, a.mask_token_id
    kw = a._cache_kw
    for lo in range(P, n, block_length):
        hi = min(lo + block_length, n)
        cache = None
        while (x[0, lo:hi] == m).any():
            if cache is None:
                cache = a.new_cache()
                logits = a.model(x, attention_mask=ones(a, n, n), use_cache=True, **{kw: cache}).logits[0, lo:hi]
            else:
                logits = a.model(x[:, lo:], attention_mask=ones(a, n - lo, n), use_cache=True,
                                 **{kw: cache}).logits[0, :hi - lo]
            cache.crop(lo - cache.get_seq_length())       # the prefix [0, lo) kept
            x0, conf = _conf(logits, m)
            masked = x[0, lo:hi] == m
            c = torch.where(masked, conf.float(), torch.tensor(-1.0))
            keep = masked & (c >= tau)
            keep[int(c.argmax())] = True
            x[0, lo:hi] = torch.where(keep, x0, x[0, lo:hi])
    return x


def sigma_cap(eta: float, j: int, steps: int) -> float:
    """remdm-cap's σ at forward j of S (α_t = j/S, α_s = (j+1)/S): min(η, (1 − α_s)/α_t), η where α_t = 0."""
    alpha_t, alpha_s = j / steps, min(1.0, (j + 1) / steps)
    return eta if alpha_t == 0 else min(eta, (1 - alpha_s) / alpha_t)


def unmask_prob(sigma: float, j: int, steps: int) -> float:
    alpha_t, alpha_s = j / steps, min(1.0, (j + 1) / steps)
    return (alpha_s - (1 - sigma) * alpha_t) / (1 - alpha_t)


@torch.no_grad()
def remdm_cap(a, prompt_ids: list[int], gen_length: int, block_length: int, steps: int, eta: float,
              seed: int) -> torch.Tensor:
    """ReMDM's remdm-cap sampler, greedy, block by block (the prompt a whole number of blocks): each of S steps
    draws one uniform per slot; a written slot goes back to [MASK] below σ, a masked one is filled below its
    unmask probability; the last step fills every slot left; a step after one that changed nothing reuses the
    last forward's logits (the release's p_x0 cache). Whole-canvas forwards under the model's block-causal mask."""
    x = torch.tensor([prompt_ids + [a.mask_token_id] * gen_length])
    P, n, m = len(prompt_ids), len(prompt_ids) + gen_length, a.mask_token_id
    assert P % block_length == 0
    pos = torch.arange(n)
    am = masks.to_backend(masks.block_causal(pos, pos, block_length), a.attn_impl, a.dtype, a.device)
    g = torch.Generator().manual_seed(seed)
    for lo in range(P, n, block_length):
        hi = min(lo + block_length, n)
        changed = True
        for j in range(steps):
            masked = x[0, lo:hi] == m
            if not masked.any() and not (eta > 0 and j < steps - 1):
                break
            if changed:
                x0, _ = _conf(a.model(x, attention_mask=am).logits[0, lo:hi], m)
            sigma = sigma_cap(eta, j, steps)
            fill = unmask_prob(sigma, j, steps)
            u = torch.rand(hi - lo, dtype=torch.float64, generator=g).float()
            last = j == steps - 1
            back = ~masked & (u < sigma) & (not last)
            put = masked if last else masked & (u < fill)
            x[0, lo:hi] = torch.where(put, x0, torch.where(back, torch.tensor(m), x[0, lo:hi]))
            changed = bool(put.any() or back.any())
    return x

