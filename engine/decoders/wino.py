"""WINO, wide-in narrow-out (Hong et al.): draft generously, keep only what the next forward still supports.

Each forward of a block:
* narrow-out: a slot drafted in an earlier forward of the block is re-masked when the model's probability of its
  token, read in this forward, is below τ_narrow;
* wide-in: every masked slot whose candidate has p ≥ τ_wide is drafted (at least the most confident one).
The block ends when it has no masks and nothing was re-masked.

Where we chose: WINO reads a drafted token's support through a masked "shadow" copy of the block; here it is read
at the token's own position in the same forward (our editing-trained tasks model restores corrupted visible tokens,
so that probability is meaningful on it; on a model trained only on masks it is not). A slot re-masked in a forward
is not drafted again in that forward, and after 2·B forwards a block stops re-masking, so every block ends.
"""

from __future__ import annotations

import torch

from engine.catalogue import config_class
from engine.decoders.schedule import token_p
from engine.decoders.threshold import threshold_commit
from engine.loop import BlockContext, Policy
from engine.trace import Reason, Revision


def unsupported(ctx: BlockContext, st, tau_narrow: float) -> torch.Tensor:
    """Written slots of the block whose token has p < τ_narrow in this forward."""
    p_tok = token_p(st.probs, ctx.tokens)                                  # (L,)
    return (ctx.written & (p_tok < tau_narrow)).nonzero()[:, 0]


class WinoPolicy(Policy):
    name = "wino"
    config_cls = config_class("wino")
    revises = True

    def run_block(self, ctx: BlockContext):
        cfg = self.cfg
        while True:
            _, st = ctx.draft()
            masked = ctx.masked.clone()
            reject = unsupported(ctx, st, cfg.tau_narrow) if ctx.step < 2 * ctx.L else torch.zeros(0, dtype=torch.long)
            drafted = 0
            if masked.any():
                idx, forced = threshold_commit(st.confidence, masked, cfg.tau_wide)
                ctx.commit(idx[~forced], st.candidate[idx[~forced]], Reason.THRESHOLD)
                ctx.commit(idx[forced], st.candidate[idx[forced]], Reason.ARGMAX)
                drafted = len(idx)
            ctx.revise(reject, None, Revision.WINO_REJECT)
            yield ctx.emit("draft", st, drafted=drafted, rejected=len(reject))
            if not ctx.masked.any() and len(reject) == 0:
                return
