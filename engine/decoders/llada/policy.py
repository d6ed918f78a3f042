"""LLaDA fixed-step decoding: each block gets `steps` forwards; step j commits k_j tokens (even schedule,
remainder first), chosen by low confidence remasking (keep the most confident) or at random.

Deviation, by design: blocks are aligned to the absolute grid, so the first block can hold fewer than B masks; its
schedule then spans min(steps, #masks) steps instead of wasting forwards that commit nothing.
"""

from __future__ import annotations

import torch

from engine.catalogue.catalogue import config_class
from engine.decoders.schedule import masked_topk, transfer_schedule
from engine.runtime.loop import BlockContext, Policy
from engine.records.trace import Reason


class LLaDAPolicy(Policy):
    name = "llada"
    config_cls = config_class("llada")

    def run_block(self, ctx: BlockContext):
        schedule = transfer_schedule(int(ctx.masked.sum()), self.cfg.steps or ctx.L)
        for k in schedule:
            if not ctx.masked_np.any():
                break
            _, st = yield from ctx.draft()
            if self.cfg.remasking == "random":
                score = torch.rand(ctx.L, dtype=torch.float64, generator=ctx.runner.generator).float()
            else:
                score = st.confidence
            idx = masked_topk(score, ctx.masked, k)
            ctx.commit(idx, st.candidate[idx], Reason.SCHEDULE)
            yield ctx.emit("draft", st)
