"""KLASS, KL-adaptive stability sampling (Kim et al.; shkim0116/KLASS, ``stable_confident_decode`` with
``alg="klass"``).

Per block, with LLaDA's quota schedule k_j (the block's masks over ``steps`` forwards), every forward:
- p_t = the slot's distribution; KL_t = Σ p_t (log p_t − log p_t−1) against the previous forward that scored it;
- stable: the last H (``kl_history``) KLs are all < ε; ready = stable ∧ p_t(x̂) > τ ∧ masked;
- if any slot is ready, commit them all (or one, by ``klass_pick``); else the step's quota, the most confident.

The KL history is the reference's, kept per slot across blocks: on a full-attention model (LLaDA, Dream) every
forward scores the whole canvas (``Runner.later``), so a slot of block 2 has a history from block 1's forwards
and can be stable from the block's H-th forward (the reference's gate: no slot is stable before forward H of a
block); a block-causal model first scores a slot in its own block's first forward, so there a slot can be stable
from the block's (H + 1)-th forward. A slot's KL compares with the forward just before, where that forward scored
it (a run with the dual cache scores the later slots only in a block's first forward).

Where we chose:
- a slot no earlier forward scored has no KL (the reference compares with zeros: a KL of about 28 nats, never
  stable);
- p is the untempered distribution and x̂ the usual candidate, as in every decoder here (at T > 0 the reference
  takes the softmax of Gumbel-perturbed exp-logits);
- the reference stops after ``steps`` forwards even if slots are left masked, and its quota may pick slots that
  are no longer masked; here the quota is capped at the masks and the block runs until it is full.
"""

from __future__ import annotations

import numpy as np
import torch

from engine.catalogue.catalogue import config_class
from engine.decoders.schedule import masked_topk, quota_at, transfer_schedule
from engine.runtime.loop import BlockContext, Policy
from engine.records.trace import Reason
from engine.decoders.klass.card import KlassFields

EPS = 1e-12   # the reference's guard inside both logs


def kl_step(p_now: torch.Tensor, p_prev: torch.Tensor | None) -> torch.Tensor:
    """(L,) KL(p_now ‖ p_prev) in nats over (L, V) distributions; inf where there is no previous one."""
    if p_prev is None:
        return torch.full((p_now.shape[0],), float("inf"), dtype=torch.float64)
    return (p_now * (torch.log(p_now + EPS) - torch.log(p_prev + EPS))).sum(-1)


def ready_slots(history: torch.Tensor, conf: torch.Tensor, masked: torch.Tensor, eps: float, tau: float):
    """(stable, ready) over (L, H) KL history (the last H forwards; inf where missing) and (L,) confidences."""
    stable = (history < eps).all(-1)
    return stable, stable & (conf > tau) & masked


def pick(ready: torch.Tensor, conf: torch.Tensor, kl: torch.Tensor, how: str, generator) -> torch.Tensor:
    """The ready slots to commit: all, or one by ``klass_pick`` (first of equal maxima, as torch.argmax)."""
    idx = ready.nonzero()[:, 0]
    if how == "all" or len(idx) <= 1:
        return idx
    if how == "max_conf":
        return idx[conf[idx].argmax()].view(1)
    if how == "min_kl":
        return idx[kl[idx].argmin()].view(1)
    return idx[torch.randint(len(idx), (1,), generator=generator)]


class KlassPolicy(Policy):
    name = "klass"
    config_cls = config_class("klass")

    def start(self, runner) -> None:
        self.history = torch.full((runner.end, self.cfg.kl_history), float("inf"), dtype=torch.float64)  # (n, H)
        self.p_prev, self.prev_lo = None, 0      # the latest forward's distributions (q, V), from position prev_lo

    def scored(self, ctx: BlockContext, st) -> tuple[torch.Tensor, torch.Tensor]:
        """This forward's distributions of its block and, on a full-attention model, every slot after it (q, V),
        and their KL against the forward before (q,); the history of those slots moves on by one."""
        r, lo = ctx.runner, ctx.lo
        later = r.later
        probs = st.probs if later is None else torch.cat([st.probs, torch.softmax(r.unmaskable(later).double(), -1)])
        kl = kl_step(probs, None)                                          # (q,) inf: no previous score
        if self.p_prev is not None:
            a, b = max(lo, self.prev_lo), min(lo + len(probs), self.prev_lo + len(self.p_prev))
            if b > a:
                kl[a - lo:b - lo] = kl_step(probs[a - lo:b - lo], self.p_prev[a - self.prev_lo:b - self.prev_lo])
        h = self.history[lo:lo + len(probs)]
        self.history[lo:lo + len(probs)] = torch.cat([h[:, 1:], kl[:, None]], dim=1)
        self.p_prev, self.prev_lo = probs, lo
        return probs, kl

    def run_block(self, ctx: BlockContext):
        cfg = self.cfg
        schedule = transfer_schedule(int(ctx.masked.sum()), cfg.steps or ctx.L)
        while ctx.masked.any():
            _, st = yield from ctx.draft()
            masked = ctx.masked.clone()
            kl = self.scored(ctx, st)[1][:ctx.L]                              # (L,)
            stable, ready = ready_slots(self.history[ctx.lo:ctx.hi], st.confidence.double(), masked, cfg.kl_eps,
                                        cfg.tau)
            stable &= ctx.step >= cfg.kl_history - 1           # the reference's gate, per block
            ready &= stable
            if ready.any():
                idx = pick(ready, st.confidence, kl, cfg.klass_pick, ctx.runner.generator)
                ctx.commit(idx, st.candidate[idx], Reason.KL_STABLE)
            else:
                idx = masked_topk(st.confidence, masked, quota_at(schedule, ctx.step))
                ctx.commit(idx, st.candidate[idx], Reason.SCHEDULE)
            shown = masked.numpy() & np.isfinite(kl.numpy())
            yield ctx.emit("draft", st, KlassFields(
                kl=np.where(shown, kl.numpy(), np.nan).astype(np.float32), kl_stable=(stable & masked).numpy(),
                klass_ready=int(ready.sum()), kl_eps=float(cfg.kl_eps)))
