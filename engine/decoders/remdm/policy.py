"""ReMDM (Wang et al., "Remasking discrete diffusion models with inference-time scaling"; the released
``_ddpm_caching_update``, samplers ``remdm-cap`` and ``remdm-conf``): a fixed-step decoder that may return written
tokens to [MASK] so that later steps can fix them.

A block of S forwards (``steps``, 0 = B) runs over the log-linear timesteps t_j = 1 − j/S, s_j = t_j − 1/S, with
α = 1 − t. At forward j, every token written before it goes back to [MASK] with probability σ (one Bernoulli draw
each, from the run's seeded generator):
* ``cap``:  σ = min(η, (1 − α_s)/α_t)           (η when α_t = 0)
* ``conf``: σ_i = σ_max · softmax_i(−p_i),  σ_max = min(1, (1 − α_s)/α_t), p_i the probability the token had when
  it was unmasked (the less sure, the likelier it goes back).
A re-masked slot waits: it is not refilled in the forward that re-masked it (in the reference one categorical draw
decides a written slot's next state: itself or [MASK]). The last forward has σ = 0, so the block ends full.

Where we chose: the reference unmasks each masked slot by its own draw; here forward j fills the ⌈m_j / (S − j)⌉
most confident of the m_j slots masked before it (LLaDA's even schedule when nothing is re-masked), so a block
always ends in S forwards; the softmax of ``conf`` runs over the block's written tokens, as Unmask decodes block by
block.
"""

from __future__ import annotations

import math

import torch

from engine.catalogue.catalogue import config_class
from engine.decoders.schedule import masked_topk
from engine.runtime.loop import BlockContext, Policy
from engine.records.trace import Reason, Revision


def sigma_max(j: int, steps: int) -> float:
    """(1 − α_s)/α_t at forward j of S, uncapped (inf at the first, where α_t = 0)."""
    t, s = 1 - j / steps, 1 - (j + 1) / steps
    alpha_t, alpha_s = 1 - t, 1 - max(s, 0.0)
    return (1 - alpha_s) / alpha_t if alpha_t > 0 else math.inf


def sigma_cap(eta: float, j: int, steps: int) -> float:
    m = sigma_max(j, steps)
    return eta if math.isinf(m) else min(eta, m)


def sigma_conf(p_unmasked: torch.Tensor, j: int, steps: int) -> torch.Tensor:
    """(w,) re-mask probabilities of the written tokens from their probabilities when unmasked."""
    return min(1.0, sigma_max(j, steps)) * torch.softmax(-p_unmasked.double(), 0).float()


class ReMDMPolicy(Policy):
    name = "remdm"
    config_cls = config_class("remdm")
    revises = True
    reads_distribution = False

    def run_block(self, ctx: BlockContext):
        cfg, steps = self.cfg, self.cfg.steps or ctx.L
        p_at = torch.zeros(ctx.L)                       # each slot's p when it was last unmasked (remdm-conf)
        for j in range(steps):
            if not ctx.masked.any():
                break
            _, st = yield from ctx.draft()
            written = ctx.written.nonzero()[:, 0]        # before this forward's commits
            if cfg.remask == "conf":
                sigma = sigma_conf(p_at[written], j, steps)
            else:
                sigma = torch.full((len(written),), sigma_cap(cfg.eta, j, steps))
            draw = torch.rand(len(written), dtype=torch.float64, generator=ctx.runner.generator).float()
            back = written[draw < sigma]
            k = math.ceil(int(ctx.masked.sum()) / (steps - j))
            idx = masked_topk(st.confidence, ctx.masked, k)
            ctx.commit(idx, st.candidate[idx], Reason.SCHEDULE)
            p_at[idx] = st.confidence[idx]
            ctx.revise(back, None, Revision.REMASK)       # after the commits: a re-masked slot waits
            yield ctx.emit("draft", st)
