"""Dream's own sampler (``diffusion_generate`` of Dream and of Fast-dLLM's ``dream/model/generation_utils.py``).

The whole answer is one block, as in ``diffusion_generate``. ``steps`` forwards walk the timesteps t_i = linspace(1, eps, steps + 1); at step i (s = t_{i+1}) every
masked slot gets a token x̂ (argmax at T = 0, else a sample after temperature, top-p, top-k) and a score:

    origin        each masked slot is revealed with probability 1 − s/t (all at the last step), with its sample
    maskgit_plus  score = p(x̂)
    topk_margin   score = p(top 1) − p(top 2)
    entropy       score = Σ p log p (minus the entropy)

and, except for ``origin``, the int(n_masked · (1 − s/t)) best-scored slots are revealed (all at the last step):
the top ones, or with ``alg_temp`` > 0 a draw without replacement from softmax(score / alg_temp). Random numbers are
drawn in the reference's order (the reveal coin flips, the samples, the draw), so a seed equal to
``torch.manual_seed`` before ``diffusion_generate`` gives its tokens. As in the reference, [MASK] itself may be drawn
(the slot then stays masked) and the decode runs every step unless ``stop_at_eos`` ends it at a decoded [EOS].
"""

from __future__ import annotations

import numpy as np
import torch

from engine.catalogue.catalogue import config_class, settle
from engine.runtime.loop import BlockContext, Policy
from engine.runtime.device import read, to_device
from engine.runtime.sampling import TOP_K, TokenStats, race
from engine.records.trace import Reason
from engine.decoders.dream.card import DreamFields


def filtered(logits: torch.Tensor, temperature: float, top_p: float, top_k: int) -> torch.Tensor:
    """Dream's ``sample_tokens`` transform: temperature, then top-p, then top-k (filtered entries -> finfo.min)."""
    z = logits / temperature if temperature > 0 else logits
    if top_p < 1:
        srt, idx = torch.sort(z, descending=True)
        drop = torch.cumsum(torch.softmax(srt, dim=-1), dim=-1) > top_p
        drop[..., 1:] = drop[..., :-1].clone()
        drop[..., 0] = False
        z = z.masked_fill(torch.zeros_like(z, dtype=torch.bool).scatter_(-1, idx, drop), torch.finfo(z.dtype).min)
    if top_k:
        z = z.masked_fill(z < torch.topk(z, min(top_k, z.shape[-1]))[0][..., -1, None], torch.finfo(z.dtype).min)
    return z


def sample_tokens(logits: torch.Tensor, cfg, alg: str, generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(score (m,), x̂ (m,), probs (m, V)) for m masked slots, as Dream's ``sample_tokens`` computes them."""
    probs = torch.softmax(filtered(logits, cfg.temperature, cfg.top_p, cfg.top_k), dim=-1)
    if cfg.temperature > 0:
        norm = probs / probs.sum(-1, keepdim=True)                 # torch.distributions.Categorical(probs).sample()
        x0 = race(norm, 1, generator)[:, 0]
        score = torch.gather(probs, -1, x0[:, None])[:, 0]
    else:
        score, x0 = probs.max(dim=-1)
    if alg == "topk_margin":
        top = torch.sort(probs, dim=-1, descending=True)[0]
        score = top[:, 0] - top[:, 1]
    elif alg == "entropy":
        score = torch.sum(probs * torch.log(probs + 1e-10), dim=-1)
    return score, x0, probs


class DreamPolicy(Policy):
    name = "dream"
    config_cls = config_class("dream")

    def settle(self, adapter):
        return settle(self.cfg, "dream", block_size=self.cfg.gen_length)   # the whole answer is one block

    def run_block(self, ctx: BlockContext):
        c, r = self.cfg, ctx.runner
        steps = c.steps or ctx.L
        times = torch.linspace(1, c.eps, steps + 1)
        for i in range(steps):
            if not ctx.masked.any():                                # the reference would run idle forwards on
                return
            masked = ctx.masked.clone()
            idx = masked.nonzero()[:, 0]                                    # the masked slots, on the host
            logits, _ = yield from r.forward("draft", ctx.lo, ctx.hi)       # (L, V)
            score, x0, probs, take, tokens = self.step(r, ctx, logits, masked, idx, times[i], times[i + 1],
                                                       i == steps - 1)
            small, p = record_stats(logits, idx, x0)
            score, take, tokens, small = yield from read(score.float(), take, tokens, small)   # the rule's one read
            full_score = torch.full((ctx.L,), float("nan"))
            if len(score) == len(idx):
                full_score[masked] = score
            ctx.commit(take, tokens, Reason.SCHEDULE)
            yield ctx.emit("draft", stats_of(small, p), DreamFields(dream_score=full_score.numpy(), alg=c.alg))

    def step(self, r, ctx, logits, masked, idx, t, s, last: bool):
        """(score, x̂, probs of the masked slots, block-relative slots to reveal, their tokens) for one step, on the
        device (the slots to reveal on the host where the host chose them)."""
        c = self.cfg
        if c.alg == "origin":
            p_transfer = 1 - s / t if not last else 1
            flip = idx[torch.rand(len(idx), generator=r.generator) < p_transfer]
            score, x0, probs = sample_tokens(logits.index_select(0, to_device(flip, logits)), c, c.alg,
                                             r.device_generator)
            return score, x0, probs, flip, x0
        mask_logits = logits.index_select(0, to_device(idx, logits))
        score, x0, probs = sample_tokens(mask_logits, c, c.alg, r.device_generator)
        n_masked = masked.sum() / 1
        k = int(n_masked * (1 - s / t)) if not last else int(n_masked)
        if k <= 0:
            return score, x0, probs, idx[:0], x0[:0]
        full = to_device(torch.full((1, r.end), float("-inf"), dtype=score.dtype), score)   # the reference's layout
        full[0, to_device(ctx.lo + idx, full)] = score
        if c.alg_temp == 0:
            _, pick = torch.topk(full, k)
        else:
            pick = race(torch.softmax(full / c.alg_temp, dim=-1), k, r.device_generator)
        take = pick[0] - ctx.lo
        rank = to_device(torch.cumsum(masked.long(), 0) - 1, take)    # slot -> its index among the masked slots
        return score, x0, probs, take, x0[rank[take]]


def record_stats(logits: torch.Tensor, idx: torch.Tensor, x0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(L, 5 + 2K) and the (L, V) softmax on the device, for the record: the model's plain softmax per slot, its
    candidate (x̂ where the step drew one at every masked slot ``idx``, else the argmax), p of it, the top-2 margin, the entropy, the argmax."""
    p = torch.softmax(logits.double(), dim=-1)                      # (L, V)
    top2 = torch.topk(p, 2, dim=-1)
    cand = top2.indices[:, 0].clone()
    if len(x0) == len(idx):
        cand[to_device(idx, cand)] = x0
    conf = p.gather(-1, cand[:, None])[:, 0]
    ent = torch.special.entr(p).sum(-1) / np.log(p.shape[-1])      # = −Σ p log p, bit for bit, in one pass
    top = torch.topk(p, min(TOP_K, p.shape[-1]), dim=-1)          # the candidates a person inspects
    return torch.cat([torch.stack([cand.to(p.dtype), conf, top2.values[:, 0] - top2.values[:, 1], ent,
                                   top2.indices[:, 0].to(p.dtype)], 1), top.indices.to(p.dtype), top.values], 1), p


def stats_of(small: torch.Tensor, p: torch.Tensor) -> TokenStats:
    """The record's ``TokenStats`` from ``record_stats``' (L, 5 + 2K), read, and its softmax (L, V) on the
    device."""
    K = (small.shape[1] - 5) // 2
    return TokenStats(small[:, 0].long(), small[:, 1].float(), small[:, 2].float(), small[:, 3].float(), p,
                      small[:, 4].long(), small[:, 5:5 + K].long(), small[:, 5 + K:])
