"""Prophet (Li et al., "Diffusion language models know the answer before decoding"; pixeli99/Prophet,
``generate_earlyexit.generate``): LLaDA's fixed steps with an early commit.

Every forward, before its step's commits: the gap g = top-1 − top-2 logit (raw logits) is averaged over the answer
region. With progress = forwards so far / (steps per block × blocks), the bar is ``gap_early`` while progress
< 0.33, ``gap_mid`` while < 0.67, else ``gap_late`` (7.5, 5.0, 2.5). If the mean gap clears the bar, every masked
slot is committed to its candidate in this forward and the step's quota is skipped; otherwise LLaDA's quota
(the most confident k_j) is committed.

Where we chose:
- the answer region: the reference averages a window of 5 positions after a prompt-given "The answer is"; with no
  such phrase here it is the block's still-masked slots, the ones an exit commits;
- after the exit the reference fills every remaining position from that one forward, which sees the whole canvas.
  On a full-attention model (LLaDA, Dream) so does this one: the exit forward's candidates after the block
  (``Runner.later``, drawn with the decode's generator) fill every [MASK] left, and the decode ends there. A
  block-causal model's forward scores only its block, so there each later block is committed whole in its own
  first forward (one forward per block, counted in NFE); so is an exit in one of the dual cache's later forwards,
  which skip the rows after the block;
- ``gap_scale`` (ours, default 1) multiplies the three bars, so a Sweep has one dial.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from engine.catalogue.catalogue import config_class
from engine.decoders.schedule import masked_topk, transfer_schedule
from engine.runtime.loop import BlockContext, Policy
from engine.records.trace import Reason
from engine.decoders.prophet.card import ProphetFields, ProphetSummary

PHASES = (0.33, 0.67)   # progress at which the bar moves from early to mid, and from mid to late


def phase_bar(progress: float, early: float, mid: float, late: float) -> float:
    """Prophet's ``should_early_exit`` bar at this progress."""
    return early if progress < PHASES[0] else mid if progress < PHASES[1] else late


def logit_gap(logits: torch.Tensor) -> torch.Tensor:
    """(L,) top-1 minus top-2 of (L, V) logits."""
    top2 = torch.topk(logits.double(), 2, dim=-1).values
    return (top2[:, 0] - top2[:, 1]).float()


class ProphetPolicy(Policy):
    name = "prophet"
    config_cls = config_class("prophet")

    def start(self, runner) -> None:
        self.forwards, self.exited_at = 0, None      # the decode's forward count; the forward that exited

    def run_block(self, ctx: BlockContext):
        cfg, B = self.cfg, self.cfg.block_size
        steps = cfg.steps or B
        nominal = steps * (ctx.index + math.ceil((ctx.runner.end - ctx.lo) / B))   # steps × blocks, as generate's
        for k in transfer_schedule(int(ctx.masked.sum()), steps):     # LLaDA's quota; an exit ends it early
            if not ctx.masked.any():
                break
            logits, st = yield from ctx.draft()
            self.forwards += 1
            masked = ctx.masked.clone()
            gap = logit_gap(logits)
            mean_gap = float(gap[masked].mean())
            progress = self.forwards / nominal
            bar = cfg.gap_scale * phase_bar(progress, cfg.gap_early, cfg.gap_mid, cfg.gap_late)
            if self.exited_at is None and mean_gap >= bar:
                self.exited_at = self.forwards
            if self.exited_at is not None:
                idx = masked.nonzero()[:, 0]
                ctx.commit(idx, st.candidate[idx], Reason.PROPHET_EXIT)
                if ctx.runner.later is not None and len(ctx.runner.later) and self.exited_at == self.forwards:
                    ctx.fill_after(ctx.runner.stats(ctx.runner.later).candidate, Reason.PROPHET_EXIT)
            else:
                idx = masked_topk(st.confidence, masked, k)
                ctx.commit(idx, st.candidate[idx], Reason.SCHEDULE)
            yield ctx.emit("draft", st, ProphetFields(
                logit_gap=np.where(masked.numpy(), gap.numpy(), np.nan).astype(np.float32), prophet_gap=mean_gap,
                prophet_bar=float(bar), progress=float(progress), exited=self.exited_at is not None))

    def summary(self, runner) -> ProphetSummary:
        return ProphetSummary(exit_forward=self.exited_at)
