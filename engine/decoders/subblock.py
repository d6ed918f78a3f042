"""Fast-dLLM v2's sub-block decoding (Wu et al., 2025; its ``generate`` with ``small_block_size``).

A block of ``block_size`` (the model's ``bd_size``) is cut into sub-blocks of ``sub_block`` slots, counted from the
block's start. They are decoded left to right: each forward runs the whole block against the cache of the finished
blocks, and commits, inside the current sub-block only, every masked slot with p > τ (strictly) and the most
confident masked slot always. On a right-shifted model the block's first slot is predicted by the last row of the
finished block before it: Fast-dLLM v2 takes it by argmax from the forward that stores that block's K/V, before
any draft of the new block, so here the block's first forward commits that slot alone (Unmask fuses the store
forward into it: the same logit, the same forward count). Fast-dLLM v2's second cache level (the block's own
K/V reused across sub-blocks, ``use_block_cache``) is not used: every forward recomputes the block.
"""

from __future__ import annotations

import torch

from engine.catalogue import config_class
from engine.loop import BlockContext, Policy
from engine.trace import Reason


def sub_block_commit(conf: torch.Tensor, masked: torch.Tensor, lo: int, hi: int, tau: float):
    """(slots with p > τ, the most confident slot) among the masked slots of [lo, hi) of the block."""
    inside = torch.zeros_like(masked)
    inside[lo:hi] = True
    live = masked & inside
    best = int(torch.where(live, conf, torch.full_like(conf, float("-inf"))).argmax())
    above = live & (conf > tau)
    above[best] = False
    return above.nonzero()[:, 0], best


class SubBlockPolicy(Policy):
    name = "subblock"
    config_cls = config_class("subblock")

    def run_block(self, ctx: BlockContext):
        cfg, r = self.cfg, ctx.runner
        if r.adapter.logit_shift and ctx.lo >= r.P and bool(ctx.masked[0]):
            _, st = ctx.draft()                        # the finished block's last row predicts the first slot
            ctx.commit(torch.tensor([0]), st.top1[:1], Reason.AR)
            yield ctx.emit("draft", st)
        for s in range(0, ctx.L, cfg.sub_block):
            e = min(s + cfg.sub_block, ctx.L)
            while ctx.masked[s:e].any():
                _, st = ctx.draft()
                above, best = sub_block_commit(st.confidence, ctx.masked, s, e, cfg.tau)
                reason = Reason.THRESHOLD if float(st.confidence[best]) > cfg.tau else Reason.ARGMAX
                ctx.commit(torch.tensor([best]), st.candidate[best:best + 1], reason)
                ctx.commit(above, st.candidate[above], Reason.THRESHOLD)
                yield ctx.emit("draft", st)
