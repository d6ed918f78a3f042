"""Autoregressive decoding: the block-diffusion model run with block size 1 (one [MASK] query per forward)."""

from __future__ import annotations

from dataclasses import dataclass

from engine.loop import BlockContext, CommonConfig, Policy
from engine.trace import Reason


@dataclass
class ARConfig(CommonConfig):
    block_size: int = 1

    def validate(self) -> None:
        super().validate()
        if self.block_size != 1:
            from engine.loop import ConfigError
            raise ConfigError("ar decodes with block_size 1")


class ARPolicy(Policy):
    name = "ar"
    config_cls = ARConfig

    def run_block(self, ctx: BlockContext):
        while ctx.masked.any():
            _, st = ctx.draft()
            idx = ctx.masked.nonzero()[:, 0]
            ctx.commit(idx, st.candidate[idx], Reason.AR)
            yield ctx.emit("draft", st)
