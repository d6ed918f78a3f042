"""ReMDM (Wang et al., "Remasking discrete diffusion models with inference-time scaling"; kuleshov-group/remdm,
``diffusion.py``'s ``_ddpm_caching_update``, samplers ``remdm-cap``, ``remdm-rescale``, ``remdm-conf`` and
``remdm-loop``): a fixed-step decoder that may return written tokens to [MASK] so that later steps can fix them.

A block of S forwards (``steps``, 0 = B) runs over the log-linear timesteps t_j = 1 − j/S, s_j = t_j − 1/S, with
α = 1 − t. At forward j the release makes one categorical draw per slot:
* a written slot goes back to [MASK] with probability σ (else keeps its token);
* a masked slot is unmasked with probability (α_s − (1 − σ)·α_t)/(1 − α_t) = 1/(S − j) + σ·α_t/(1 − α_t) (the
  MDLM step plus the compensation for what σ re-masks), its token the decode's candidate.
σ by ``remask``:
* ``cap``:      σ = min(η, (1 − α_s)/α_t)             (η when α_t = 0)
* ``rescale``:  σ = η · min(1, (1 − α_s)/α_t)          (η when α_t = 0)
* ``conf``:     σ_i = σ_max · softmax_i(−p_i) over every written token of the sequence (the release's
  ``conf.softmax(dim=-1)`` runs over its whole canvas), p_i the probability the token had when it was unmasked;
  σ_max = min(1, (1 − α_s)/α_t); a masked slot has σ = 0, so it unmasks with 1/(S − j);
* ``loop``:     t > t_on: MDLM (no re-masking) on α rising from 0 to α_on; t ≤ t_off: MDLM on α rising from α_on to
  1; between, α is held at α_on and written slots go back with σ = η while masked ones unmask with
  σ·α_on/(1 − α_on).
Here each slot's draw is one uniform u_i from the decode's generator (one per slot of the block, in position
order, every forward): a written slot goes back if u_i < σ_i, a masked one is filled if u_i < its unmask
probability (``remdm_fill=random``). ``remdm_fill=confident`` (Unmask's earlier rule) instead fills the
⌈m_j/(S − j)⌉ most confident of the m_j masked slots, so a block always ends in S forwards.

Where we differ: the release's timesteps end at ε = 1e-5 and a final noise-removal forward takes the argmax; here
the last forward (s = 0) fills every slot still masked and re-masks none (for cap, rescale and conf that is what
the formulas give at s = 0; for loop it ends the block even where S is too small for the grid to reach t_off). A
finished block is final (Unmask decodes block by block), so re-masking acts on the current block only; conf's
softmax still weighs every written token of the sequence. A block whose slots are all written keeps running its S
forwards while a re-mask can still happen, as the release's sampler does.
"""

from __future__ import annotations

import math

import torch

from engine.catalogue.catalogue import config_class
from engine.decoders.schedule import masked_topk
from engine.runtime.loop import BlockContext, Policy
from engine.records.trace import Reason, Revision


def alphas(j: int, steps: int) -> tuple[float, float]:
    """(α_t, α_s) at forward j of S on t = 1 − j/S, s = t − 1/S (α = 1 − t)."""
    return j / steps, min(1.0, (j + 1) / steps)


def sigma_max(j: int, steps: int) -> float:
    """(1 − α_s)/α_t at forward j of S, uncapped (inf at the first, where α_t = 0)."""
    alpha_t, alpha_s = alphas(j, steps)
    return (1 - alpha_s) / alpha_t if alpha_t > 0 else math.inf


def sigma_cap(eta: float, j: int, steps: int) -> float:
    m = sigma_max(j, steps)
    return eta if math.isinf(m) else min(eta, m)


def sigma_rescale(eta: float, j: int, steps: int) -> float:
    return eta * min(1.0, sigma_max(j, steps))


def sigma_conf(p_unmasked: torch.Tensor, j: int, steps: int) -> torch.Tensor:
    """(w,) re-mask probabilities of the written tokens from their probabilities when unmasked."""
    return min(1.0, sigma_max(j, steps)) * torch.softmax(-p_unmasked.double(), 0).float()


def unmask_prob(sigma: float, j: int, steps: int) -> float:
    """A masked slot's probability of being unmasked at forward j: (α_s − (1 − σ)α_t)/(1 − α_t)."""
    alpha_t, alpha_s = alphas(j, steps)
    return (alpha_s - (1 - sigma) * alpha_t) / (1 - alpha_t)


def loop_rates(eta: float, t_on: float, t_off: float, alpha_on: float, j: int, steps: int) -> tuple[float, float]:
    """remdm-loop's (σ for written slots, unmask probability for masked ones) at forward j of S."""
    t, s = 1 - j / steps, 1 - (j + 1) / steps
    if t > t_on:      # move chance (1 − α) from 1 down to 1 − α_on
        move_t, move_s = (1 - (1 - x) * alpha_on / (1 - t_on) for x in (t, s))
    elif t <= t_off:  # from 1 − α_on down to 0
        move_t, move_s = (x * (1 - alpha_on) / t_off for x in (t, s))
    else:             # the loop: α held at α_on
        return eta, eta * alpha_on / (1 - alpha_on)
    return 0.0, (move_t - move_s) / move_t


class ReMDMPolicy(Policy):
    name = "remdm"
    config_cls = config_class("remdm")
    revises = True

    def start(self, runner) -> None:
        self.p_at = torch.zeros(runner.end)      # each slot's p when it was last unmasked (remdm-conf), sequence-wide

    def rates(self, ctx: BlockContext, j: int, steps: int, written: torch.Tensor) -> tuple[torch.Tensor, float]:
        """(L,) σ of the block's slots (0 where not written) and the masked slots' unmask probability."""
        cfg, r, lo, hi = self.cfg, ctx.runner, ctx.lo, ctx.hi
        sigma = torch.zeros(len(written))
        if cfg.remask == "conf":     # a block-causal model's first block may start inside the prompt (lo < P)
            seq = ~r.masked(0, r.end) & (torch.arange(r.end) >= r.P)        # every written token of the answer
            full = torch.zeros(r.end)
            full[seq] = sigma_conf(self.p_at[seq], j, steps)
            sigma = torch.where(written, full[lo:hi], sigma)
            return sigma, unmask_prob(0.0, j, steps)
        if cfg.remask == "loop":
            s, fill = loop_rates(cfg.eta, cfg.t_on, cfg.t_off, cfg.alpha_on, j, steps)
        else:
            s = (sigma_cap if cfg.remask == "cap" else sigma_rescale)(cfg.eta, j, steps)
            fill = unmask_prob(s, j, steps)
        return torch.where(written, torch.tensor(s, dtype=torch.float32), sigma), fill

    def may_remask(self, j: int, steps: int) -> bool:
        """Whether any forward from j on (before the last) can send a written token back."""
        cfg = self.cfg
        later = range(j, steps - 1)
        if cfg.remask == "conf":
            return len(later) > 0
        if cfg.remask == "loop":
            return any(loop_rates(cfg.eta, cfg.t_on, cfg.t_off, cfg.alpha_on, i, steps)[0] > 0 for i in later)
        return cfg.eta > 0 and len(later) > 0

    def run_block(self, ctx: BlockContext):
        cfg, steps = self.cfg, self.cfg.steps or ctx.L
        for j in range(steps):
            if not ctx.masked.any() and not self.may_remask(j, steps):
                break
            _, st = yield from ctx.draft()
            masked, written = ctx.masked.clone(), ctx.written.clone()          # before this forward's writes
            sigma, fill = self.rates(ctx, j, steps, written)
            u = torch.rand(ctx.L, dtype=torch.float64, generator=ctx.runner.generator).float()
            last = j == steps - 1
            back = (written & (u < sigma)).nonzero()[:, 0] if not last else torch.zeros(0, dtype=torch.long)
            if last:
                idx = masked.nonzero()[:, 0]
            elif cfg.remdm_fill == "random":
                idx = (masked & (u < fill)).nonzero()[:, 0]
            else:
                idx = masked_topk(st.confidence, masked, math.ceil(int(masked.sum()) / (steps - j)))
            ctx.commit(idx, st.candidate[idx], Reason.SCHEDULE)
            self.p_at[ctx.lo + idx] = st.confidence[idx]
            ctx.revise(back, None, Revision.REMASK)       # after the commits: a re-masked slot waits
            yield ctx.emit("draft", st)
