"""Confidence-threshold parallel decoding.

rule="fastdllm" (Fast-dLLM v1): commit argmax_i c_i  U  {i : c_i >= tau} over the block's masked positions, so
every step makes progress; tau = 1 commits one token per step (unless a probability is exactly 1).
rule="sdar" (SDAR low_confidence_dynamic): with the step quota k_j of an even schedule over `steps`, commit all
positions with c_i > tau if there are at least k_j of them, else the top-k_j by confidence.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.decoders.schedule import transfer_schedule
from engine.loop import BlockContext, CommonConfig, ConfigError, Policy
from engine.trace import Reason


@dataclass
class ThresholdConfig(CommonConfig):
    tau: float = 0.9
    rule: str = "fastdllm"
    steps: int = 0          # sdar rule: denoising steps per block (0 = block_size)

    def validate(self) -> None:
        super().validate()
        if not 0.0 < self.tau <= 1.0:
            raise ConfigError("tau must be in (0, 1]")
        if self.rule not in ("fastdllm", "sdar"):
            raise ConfigError("rule must be fastdllm or sdar")
        if self.steps < 0:
            raise ConfigError("steps must be >= 0")


def threshold_commit(conf: torch.Tensor, masked: torch.Tensor, tau: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Fast-dLLM rule on (L,) confidences: returns (indices, forced flag per index)."""
    c = torch.where(masked, conf, torch.full_like(conf, -1.0))
    best = int(c.argmax())
    chosen = masked & (conf >= tau)
    chosen[best] = True
    idx = chosen.nonzero()[:, 0]
    return idx, (idx == best) & (conf[idx] < tau)


def dynamic_commit(conf: torch.Tensor, masked: torch.Tensor, tau: float, quota: int) -> torch.Tensor:
    """SDAR dynamic rule: all c > tau if at least `quota` of them, else the top-`quota` masked positions."""
    above = masked & (conf > tau)
    if int(above.sum()) >= quota:
        return above.nonzero()[:, 0]
    c = torch.where(masked, conf, torch.full_like(conf, -1.0))
    return torch.topk(c, min(quota, int(masked.sum()))).indices.sort().values


class ThresholdPolicy(Policy):
    name = "threshold"
    config_cls = ThresholdConfig

    def run_block(self, ctx: BlockContext):
        cfg = self.cfg
        schedule = transfer_schedule(int(ctx.masked.sum()), cfg.steps or ctx.L)
        while ctx.masked.any():
            _, st = ctx.draft()
            masked = ctx.masked
            if cfg.rule == "fastdllm":
                idx, forced = threshold_commit(st.confidence, masked, cfg.tau)
                for sel, why in ((idx[~forced], Reason.THRESHOLD), (idx[forced], Reason.ARGMAX)):
                    ctx.commit(sel, st.candidate[sel], why)
            else:
                quota = schedule[min(ctx.step, len(schedule) - 1)]
                idx = dynamic_commit(st.confidence, masked, cfg.tau, quota)
                ctx.commit(idx, st.candidate[idx], Reason.THRESHOLD)
            yield ctx.emit("draft", st)
