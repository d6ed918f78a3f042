"""LLaDA fixed-step decoding: each block gets `steps` forwards; step j commits k_j tokens (even schedule,
remainder first), chosen by low confidence remasking (keep the most confident) or at random.

``precision=model`` ranks as LLaDA's generate.py as first released (and its many copies) does at T = 0: the
softmax of the logits in their own dtype (bf16 on a GPU), whose confidences tie often, and ``torch.topk`` over the
whole canvas in that dtype, whose tie-breaking is then the release's on the same device (its current generate.py
casts to float64, as ``precision=float64``, the default).

Deviation, by design: blocks are aligned to the absolute grid, so the first block can hold fewer than B masks; its
schedule then spans min(steps, #masks) steps instead of wasting forwards that commit nothing.
"""

from __future__ import annotations

import torch

from engine.catalogue.catalogue import config_class
from engine.decoders.schedule import masked_topk, transfer_schedule
from engine.runtime.device import host
from engine.runtime.loop import BlockContext, Policy
from engine.records.trace import Reason


def canvas_topk(ctx: BlockContext, conf: torch.Tensor, k: int) -> torch.Tensor:
    """generate.py's ranking: ``torch.topk`` over the whole canvas's confidences in the model's dtype, −inf but at
    the block's masked slots. Its ties (frequent in bf16) break as torch's topk breaks them on that tensor."""
    r = ctx.runner           # on the model's device: ties break there as the release's topk breaks them
    full = torch.full((r.end,), float("-inf"), dtype=r.adapter.dtype)
    full[ctx.lo:ctx.hi] = torch.where(ctx.masked, conf, float("-inf")).to(r.adapter.dtype)
    top = host(torch.topk(full.to(r.adapter.device), min(k, int(ctx.masked.sum()))).indices)
    return top.sort().values - ctx.lo


class LLaDAPolicy(Policy):
    name = "llada"
    config_cls = config_class("llada")
    step_scoped = True          # nothing of a forward outlives its step: a decode keeps no (q, V) between forwards

    def run_block(self, ctx: BlockContext):
        schedule = transfer_schedule(int(ctx.masked.sum()), self.cfg.steps or ctx.L)
        for k in schedule:
            if not ctx.masked_np.any():
                break
            yield from self.step(ctx, k)

    def step(self, ctx: BlockContext, k: int):
        """One forward, committing ``k`` slots."""
        _, st = yield from ctx.draft()
        if self.cfg.remasking == "random":
            idx = masked_topk(torch.rand(ctx.L, dtype=torch.float64, generator=ctx.runner.generator).float(),
                              ctx.masked, k)
        elif self.cfg.precision == "model":
            idx = canvas_topk(ctx, st.confidence, k)
        else:
            idx = masked_topk(st.confidence, ctx.masked, k)
        ctx.commit(idx, st.candidate[idx], Reason.SCHEDULE)
        yield ctx.emit("draft", st)
