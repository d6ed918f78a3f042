"""WINO, wide-in narrow-out (Hong et al.; the released ``decoding_wino``): draft generously, keep only what the
next forward still supports.

Each forward of a block, with ``m`` masked slots before it:
* wide-in: every masked slot whose candidate has p > τ_wide is drafted, at most ``max_accept = min(max(⌊0.7·m⌋, 5),
  20)`` of them (the most confident), and at least the most confident one;
* narrow-out, only when this forward drafted more than one token: a slot written before this forward whose token
  has p < τ_narrow is re-masked; if ``last_accept`` or more are (``last_accept``: the previous forward's drafts, 30
  before a block's first), only the ``last_accept − 1`` least supported are.
The block ends when it has no masks. The guards bound the re-masks by the previous forward's drafts, so every
block ends.

Where we chose: WINO reads a drafted token's support through a masked "shadow" copy of the block; here it is read
at the token's own position in the same forward (our editing-trained tasks model restores corrupted visible tokens,
so that probability is meaningful on it; on a model trained only on masks it is not).
"""

from __future__ import annotations

import torch

from engine.catalogue.catalogue import config_class
from engine.decoders.schedule import token_p
from engine.runtime.device import read
from engine.runtime.loop import BlockContext, Policy
from engine.records.trace import Reason, Revision
from engine.decoders.wino.card import WinoFields


def max_accept(masked: int) -> int:
    """WINO's draft cap for a forward over ``masked`` masked slots."""
    return min(max(int(masked * 0.7), 5), 20)


def wide_in(conf: torch.Tensor, masked: torch.Tensor, tau_wide: float) -> torch.Tensor:
    """Indices drafted from (L,) confidences: p > τ_wide, capped at max_accept by confidence, at least the best."""
    c = torch.where(masked, conf, torch.full_like(conf, -1.0))
    chosen = (c > tau_wide).nonzero()[:, 0]
    cap = max_accept(int(masked.sum()))
    if len(chosen) > cap:
        return torch.sort(torch.topk(c, cap).indices).values
    return chosen if len(chosen) else c.argmax().view(1)


def narrow_out(p_written: torch.Tensor, written: torch.Tensor, tau_narrow: float, accepted: int,
               last_accept: int) -> torch.Tensor:
    """Indices re-masked: only after a forward that drafted more than one token; written slots with p < τ_narrow,
    at most the last_accept − 1 least supported when last_accept or more qualify."""
    if accepted <= 1:
        return torch.zeros(0, dtype=torch.long)
    weak = written & (p_written < tau_narrow)
    if int(weak.sum()) < last_accept:
        return weak.nonzero()[:, 0]
    back = torch.where(written, p_written, torch.full_like(p_written, float("inf")))
    return torch.sort(torch.topk(back, max(last_accept - 1, 0), largest=False).indices).values


class WinoPolicy(Policy):
    name = "wino"
    config_cls = config_class("wino")
    revises = True

    def run_block(self, ctx: BlockContext):
        cfg, last_accept = self.cfg, 30          # the reference's start value for each block
        while True:
            _, st = yield from ctx.draft()
            written = ctx.written.clone()                                   # before this forward's drafts
            p_written, = yield from read(token_p(st.probs, ctx.tokens))    # (L,)
            idx = wide_in(st.confidence, ctx.masked, cfg.tau_wide)          # the loop runs while masks remain
            forced = (st.confidence[idx] <= cfg.tau_wide)
            ctx.commit(idx[~forced], st.candidate[idx[~forced]], Reason.THRESHOLD)
            ctx.commit(idx[forced], st.candidate[idx[forced]], Reason.ARGMAX)
            reject = narrow_out(p_written, written, cfg.tau_narrow, len(idx), last_accept)
            ctx.revise(reject, None, Revision.WINO_REJECT)
            last_accept = len(idx)
            yield ctx.emit("draft", st, WinoFields(drafted=len(idx), rejected=len(reject)))
            if not ctx.masked.any():
                return
