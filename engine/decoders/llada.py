"""LLaDA fixed-step decoding: each block gets `steps` forwards; step j commits k_j tokens (even schedule,
remainder first), chosen by low confidence remasking (keep the most confident) or at random.

Deviation, by design: blocks are aligned to the absolute grid, so the first block can hold fewer than B masks; its
schedule then spans min(steps, #masks) steps instead of wasting forwards that commit nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.decoders.schedule import transfer_schedule
from engine.loop import BlockContext, CommonConfig, ConfigError, Policy
from engine.trace import Reason


@dataclass
class LLaDAConfig(CommonConfig):
    steps: int = 0              # per block; 0 = block_size (one token per step)
    remasking: str = "low_confidence"

    def validate(self) -> None:
        super().validate()
        if self.steps < 0 or self.steps > 1024:
            raise ConfigError("steps must be in 0..1024")
        if self.remasking not in ("low_confidence", "random"):
            raise ConfigError("remasking must be low_confidence or random")


class LLaDAPolicy(Policy):
    name = "llada"
    config_cls = LLaDAConfig

    def run_block(self, ctx: BlockContext):
        schedule = transfer_schedule(int(ctx.masked.sum()), self.cfg.steps or ctx.L)
        for k in schedule:
            if not ctx.masked.any():
                break
            _, st = ctx.draft()
            masked = ctx.masked
            if self.cfg.remasking == "random":
                score = torch.rand(ctx.L, dtype=torch.float64, generator=ctx.runner.generator).float()
            else:
                score = st.confidence.clone()
            score[~masked] = float("-inf")
            idx = torch.topk(score, min(k, int(masked.sum()))).indices.sort().values
            ctx.commit(idx, st.candidate[idx], Reason.SCHEDULE)
            yield ctx.emit("draft", st)
