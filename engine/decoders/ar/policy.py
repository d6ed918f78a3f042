"""Autoregressive decoding: the block-diffusion model run with block size 1 (one [MASK] query per forward)."""

from __future__ import annotations

from engine.catalogue.catalogue import config_class
from engine.runtime.loop import BlockContext, Policy
from engine.records.trace import Reason


class ARPolicy(Policy):
    name = "ar"
    config_cls = config_class("ar")

    def run_block(self, ctx: BlockContext):
        while ctx.masked.any():
            _, st = yield from ctx.draft()
            idx = ctx.masked.nonzero()[:, 0]
            ctx.commit(idx, st.candidate[idx], Reason.AR)
            yield ctx.emit("draft", st)
