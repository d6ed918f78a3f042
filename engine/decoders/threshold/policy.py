"""Confidence-threshold parallel decoding.

rule="fastdllm" (Fast-dLLM v1): commit argmax_i c_i  U  {i : c_i >= tau} over the block's masked positions, so
every step makes progress; tau = 1 commits one token per step (unless a probability is exactly 1).
rule="sdar" (SDAR low_confidence_dynamic): with the step quota k_j of an even schedule of B over `steps`
(``block_schedule``), commit all positions with c_i > tau if there are at least k_j of them, else the top-k_j by
confidence.
"""

from __future__ import annotations

import numpy as np
import torch

from engine.catalogue.catalogue import config_class
from engine.decoders.schedule import block_schedule, masked_topk, quota_at
from engine.runtime.loop import BlockContext, Policy
from engine.records.trace import Reason


THRESHOLD, ARGMAX = int(Reason.THRESHOLD), int(Reason.ARGMAX)      # as ints: an enum member costs a lookup per step


def threshold_commit(conf, masked, tau: float) -> tuple[np.ndarray, np.ndarray]:
    """Fast-dLLM rule on (L,) confidences and masked flags (host tensors or arrays): returns (indices, forced flag
    per index) as arrays. In numpy: a dozen operations on a block's few values cost less there than torch's
    dispatch (τ is compared in the confidences' float32 in both)."""
    c, m = np.asarray(conf), np.asarray(masked)
    best = int(np.where(m, c, -1.0).argmax())                                    # first of equal maxima
    chosen = m & (c >= tau)
    chosen[best] = True
    idx = np.flatnonzero(chosen)
    return idx, (idx == best) & (c[idx] < tau)


def dynamic_commit(conf: torch.Tensor, masked: torch.Tensor, tau: float, quota: int) -> torch.Tensor:
    """SDAR dynamic rule: all c > tau if at least `quota` of them, else the top-`quota` masked positions."""
    above = masked & (conf > tau)
    if int(above.sum()) >= quota:
        return above.nonzero()[:, 0]
    return masked_topk(conf, masked, quota)


class ThresholdPolicy(Policy):
    name = "threshold"
    config_cls = config_class("threshold")

    def run_block(self, ctx: BlockContext):
        cfg = self.cfg
        schedule = block_schedule(cfg.block_size, cfg.steps or cfg.block_size)
        while (masked := ctx.masked_np).any():
            _, st = yield from ctx.draft()
            if cfg.rule == "fastdllm":
                idx, forced = threshold_commit(st.confidence.numpy(), masked, cfg.tau)
                ctx.commit(idx, st.candidate.numpy()[idx], np.where(forced, ARGMAX, THRESHOLD))
            else:
                idx = dynamic_commit(st.confidence, torch.from_numpy(masked), cfg.tau, quota_at(schedule, ctx.step))
                ctx.commit(idx, st.candidate[idx], Reason.THRESHOLD)
            yield ctx.emit("draft", st)
