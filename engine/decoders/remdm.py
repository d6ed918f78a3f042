"""ReMDM (Wang et al., "Remasking discrete diffusion models with inference-time scaling"): a fixed-step decoder that
may return written tokens to [MASK] so that later steps can fix them.

Inside a block of S forwards (``steps``, 0 = B; LLaDA's even quota k_j), forward j < S − 1 first re-masks the
r_j = ⌊η · written + ½⌋ (the expected count of ReMDM's per-token σ = η, rounded) written slots of the block with the lowest probability of their own token in this forward
(ReMDM-conf: the least supported go back), then commits k_j + r_j masked slots by confidence, so the block still
fills in S forwards. The last forward re-masks nothing. η is the paper's capped remasking rate (σ_t = η, the
"max-capped" schedule); we apply it per block, as Unmask decodes block by block.
"""

from __future__ import annotations

import math

import torch

from engine.catalogue import config_class
from engine.decoders.schedule import masked_topk, token_p, transfer_schedule
from engine.loop import BlockContext, Policy
from engine.trace import Reason, Revision


def least_supported(ctx: BlockContext, st, r: int) -> torch.Tensor:
    """The r written slots whose own token is least probable in this forward."""
    written = ctx.written
    if r <= 0 or not written.any():
        return torch.zeros(0, dtype=torch.long)
    p_tok = token_p(st.probs, ctx.tokens)
    score = torch.where(written, -p_tok, torch.full_like(p_tok, float("-inf")))
    return torch.topk(score, min(r, int(written.sum()))).indices.sort().values


class ReMDMPolicy(Policy):
    name = "remdm"
    config_cls = config_class("remdm")
    revises = True

    def run_block(self, ctx: BlockContext):
        schedule = transfer_schedule(int(ctx.masked.sum()), self.cfg.steps or ctx.L)
        for j, k in enumerate(schedule):
            if not ctx.masked.any():
                break
            _, st = ctx.draft()
            last = j == len(schedule) - 1
            back = least_supported(ctx, st, 0 if last else math.floor(self.cfg.eta * int(ctx.written.sum()) + 0.5))
            ctx.revise(back, None, Revision.REMASK)
            idx = masked_topk(st.confidence, ctx.masked, k + len(back))
            ctx.commit(idx, st.candidate[idx], Reason.SCHEDULE)
            yield ctx.emit("draft", st)
