"""Credit decoding (dInfer, ``CreditThresholdParallelDecoder``): the threshold rule on logits fused with evidence
accumulated over the block's forwards.

Per block, a credit matrix C (L, V) starts at 0. Every forward, with logits z and p = softmax(z):
- C ← β · C (not before the block's first forward);
- at each masked slot i, C[i, argmax p_i] += (max p_i)^γ;
- fused logits z' = z + α · log(1 + C); the candidate x̂ and its confidence c come from z' (the usual sampler);
- commit every masked slot with c ≥ min(max c − 10⁻⁵, τ): all that clear τ, else the best (and any within 10⁻⁵).
The block's credit is dropped when it is full (dInfer keys it by the block's span).

Where we chose: dInfer excludes a slot whose x̂ is [MASK] from the commit; here, as in every decoder, [MASK] is
not a candidate (its logit is −inf before sampling).
"""

from __future__ import annotations

import numpy as np
import torch

from engine.catalogue.catalogue import config_class
from engine.decoders.schedule import token_p
from engine.runtime.device import read, to_device
from engine.runtime.sampling import stats_on_device, unpack
from engine.runtime.loop import BlockContext, Policy
from engine.records.trace import Reason
from engine.decoders.credit.card import CreditFields

TIE = 1e-5   # dInfer's slack below the best confidence


def add_credit(credit: torch.Tensor, probs: torch.Tensor, masked: torch.Tensor, gamma: float, beta: float,
               first: bool) -> torch.Tensor:
    """One forward's update of (L, V) credit from (L, V) probabilities: decay (not on the block's first), then
    p₁^γ onto each masked slot's top-1 token."""
    credit = credit if first else credit * beta
    top = probs.max(-1)
    boost = top.values.pow(gamma) * to_device(masked, probs).to(probs.dtype)   # (L,)
    return credit.scatter_add(1, top.indices[:, None], boost[:, None].to(credit.dtype))


def fuse(logits: torch.Tensor, credit: torch.Tensor, alpha: float) -> torch.Tensor:
    """(L, V) logits + α · log(1 + C)."""
    return logits + alpha * torch.log1p(credit).to(logits.dtype)


def raw_p(runner, logits: torch.Tensor, raw, tokens: torch.Tensor) -> torch.Tensor:
    """(L,) the model's own p (untempered, float64) of each slot's committed candidate, on the device: from the
    round's statistics where they were made, else as exp(z − logsumexp z) at the candidate alone (one pass over V)."""
    if raw is not None:
        return token_p(raw.probs, tokens)
    z = runner.unmaskable(logits).double()
    at = z.gather(-1, to_device(tokens[:, None].clamp_min(0), z))[:, 0]
    return (at - torch.logsumexp(z, -1)).exp().float()


def credit_commit(conf: torch.Tensor, masked: torch.Tensor, tau: float) -> torch.Tensor:
    """dInfer's ``get_transfer_index_threshold``: masked slots with c ≥ min(max c − 10⁻⁵, τ)."""
    c = torch.where(masked, conf.double(), torch.full_like(conf, float("-inf"), dtype=torch.float64))
    bar = min(float(c.max()) - TIE, tau)
    return (masked & (c >= bar)).nonzero()[:, 0]


class CreditPolicy(Policy):
    name = "credit"
    config_cls = config_class("credit")

    def run_block(self, ctx: BlockContext):
        cfg = self.cfg
        credit = None
        while ctx.masked.any():
            if cfg.temperature > 0:        # the round's statistics draw: the seeded stream stays as it was
                logits, raw = yield from ctx.draft()
            else:                          # greedy: the raw logits' statistics would only give raw_conf
                (logits, _), raw = (yield from ctx.runner.forward("draft", ctx.lo, ctx.hi)), None
            masked = ctx.masked.clone()
            probs = torch.softmax(logits.float(), dim=-1)                      # dInfer: float32, untempered
            credit = add_credit(torch.zeros_like(probs) if credit is None else credit, probs, masked,
                                cfg.credit_gamma, cfg.credit_beta, first=ctx.step == 0)
            st, at, raw_conf = yield from self.fused_stats(ctx, logits, credit, raw)
            idx = credit_commit(st.confidence, masked, cfg.tau)
            forced = st.confidence[idx] < cfg.tau
            ctx.commit(idx[~forced], st.candidate[idx[~forced]], Reason.THRESHOLD)
            ctx.commit(idx[forced], st.candidate[idx[forced]], Reason.ARGMAX)
            at, m = at.numpy(), masked.numpy()
            yield ctx.emit("draft", st, CreditFields(
                credit=np.where(m, at, np.nan).astype(np.float32),
                credit_boost=np.where(m, cfg.credit_alpha * np.log1p(at), np.nan).astype(np.float32),
                raw_conf=np.where(m, raw_conf.numpy(), np.nan).astype(np.float32)))

    def fused_stats(self, ctx: BlockContext, logits: torch.Tensor, credit: torch.Tensor, raw):
        """The fused logits' statistics, and at each slot's candidate the credit and the raw p, reduced on the
        device (the credit map stays there) and read in one ``Read`` with the round's other rules (a generator)."""
        r, c = ctx.runner, self.cfg
        small, probs = stats_on_device(r.unmaskable(fuse(logits, credit, c.credit_alpha)), c.temperature, c.top_k,
                                       c.top_p, r.device_generator)
        candidate = small[:, 0].long()                                                     # (L,) on the device
        small, at, raw_conf = yield from read(small, token_p(credit, candidate), raw_p(r, logits, raw, candidate))
        return unpack(small.numpy(), [([logits], None, probs)])[0], at, raw_conf
