"""Fast-dLLM v2's sub-block decoding (Wu et al., 2025; its ``generate`` with ``small_block_size``).

A block of ``block_size`` (the model's ``bd_size``) is cut into sub-blocks of ``sub_block`` slots, counted from the
block's start. They are decoded left to right: each forward runs the whole block against the cache of the finished
blocks, and commits, inside the current sub-block only, every masked slot with p > τ (strictly) and the most
confident masked slot always. With ``block_cache`` (Fast-dLLM v2's second cache level, ``use_block_cache``), a
sub-block whose first slot is decided runs its rows alone against the block's other K/V from the latest whole-block
forward (stale), spliced in position order; a sub-block whose first slot is masked runs the whole block, which
refreshes them. On a right-shifted model the block's first slot is predicted by the last row of the
finished block before it: Fast-dLLM v2 takes it by argmax from the forward that stores that block's K/V, before
any draft of the new block, so here the block's first forward commits that slot alone (Unmask fuses the store
forward into it: the same logit, the same forward count).
"""

from __future__ import annotations

import torch

from engine.catalogue import config_class
from engine.loop import BlockContext, Policy
from engine.sampling import TokenStats
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

    def start(self, runner) -> None:
        runner.keep_block_kv = self.cfg.block_cache and runner.cache is not None

    def draft(self, ctx: BlockContext, s: int, e: int) -> TokenStats:
        """The step's statistics: the whole block, or (block cache, the sub-block's first slot decided) the
        sub-block's rows alone, the other slots of the record left unscored."""
        r = ctx.runner
        if not (r.keep_block_kv and r.block_kv and r.block_kv[0] == ctx.lo and not ctx.masked[s]):
            return ctx.draft()[1]
        rows = r.forward_rows("draft", ctx.lo + s, ctx.lo + e)                      # (e - s, V)
        logits = torch.zeros(ctx.L, rows.shape[-1])
        logits[s:e] = rows
        st = r.stats(logits)
        out = torch.ones(ctx.L, dtype=torch.bool)
        out[s:e] = False
        st.confidence[out], st.margin[out], st.entropy[out] = float("nan"), float("nan"), float("nan")
        st.candidate[out], st.probs[out] = -1, 0.0               # unscored (the rule looks inside the sub-block only)
        return st

    def run_block(self, ctx: BlockContext):
        cfg, r = self.cfg, ctx.runner
        if r.adapter.logit_shift and ctx.lo >= r.P and bool(ctx.masked[0]):
            st = self.draft(ctx, 0, cfg.sub_block)     # the finished block's last row predicts the first slot
            ctx.commit(torch.tensor([0]), st.top1[:1], Reason.AR)
            yield ctx.emit("draft", st)
        for s in range(0, ctx.L, cfg.sub_block):
            e = min(s + cfg.sub_block, ctx.L)
            while ctx.masked[s:e].any():
                st = self.draft(ctx, s, e)
                above, best = sub_block_commit(st.confidence, ctx.masked, s, e, cfg.tau)
                reason = Reason.THRESHOLD if float(st.confidence[best]) > cfg.tau else Reason.ARGMAX
                ctx.commit(torch.tensor([best]), st.candidate[best:best + 1], reason)
                ctx.commit(above, st.candidate[above], Reason.THRESHOLD)
                yield ctx.emit("draft", st)
