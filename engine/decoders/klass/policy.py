"""KLASS, KL-adaptive stability sampling (Kim et al.; shkim0116/KLASS, ``stable_confident_decode`` with
``alg="klass"``).

Per block, with LLaDA's quota schedule k_j (the block's masks over ``steps`` forwards), every forward:
- p_t = the slot's distribution; KL_t = Σ p_t (log p_t − log p_t−1) against the previous forward that scored it;
- stable: the last H (``kl_history``) KLs are all < ε; ready = stable ∧ p_t(x̂) > τ ∧ masked;
- if any slot is ready, commit them all (or one, by ``klass_pick``); else the step's quota, the most confident.

Where we chose:
- a slot no earlier forward scored has no KL (the reference compares with zeros: a KL of about 28 nats, never
  stable); the KL history and the previous distributions start afresh at every block. On a block-causal model that
  is the model's own limit (a block's slots are first scored in its own first forward, so a slot can be stable
  from the block's (H + 1)-th forward). On a full-attention model (LLaDA, Dream) it is a deviation of ours: the
  reference's forwards score every later slot too and keep their history across blocks, so from block 2 on a slot
  there can be stable one forward sooner than here;
- p is the untempered distribution and x̂ the usual candidate, as in every decoder here (at T > 0 the reference
  takes the softmax of Gumbel-perturbed exp-logits);
- the reference stops after ``steps`` forwards even if slots are left masked, and its quota may pick slots that
  are no longer masked; here the quota is capped at the masks and the block runs until it is full.
"""

from __future__ import annotations

import numpy as np
import torch

from engine.decoders.catalogue import config_class
from engine.decoders.schedule import masked_topk, quota_at, transfer_schedule
from engine.runtime.loop import BlockContext, Policy
from engine.records.trace import Reason

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

    def run_block(self, ctx: BlockContext):
        cfg = self.cfg
        schedule = transfer_schedule(int(ctx.masked.sum()), cfg.steps or ctx.L)
        history = torch.full((ctx.L, cfg.kl_history), float("inf"), dtype=torch.float64)   # (L, H)
        p_prev = None
        while ctx.masked.any():
            _, st = yield from ctx.draft()
            masked = ctx.masked.clone()
            kl = kl_step(st.probs, p_prev)                                   # (L,)
            history = torch.cat([history[:, 1:], kl[:, None]], dim=1)
            p_prev = st.probs
            stable, ready = ready_slots(history, st.confidence.double(), masked, cfg.kl_eps, cfg.tau)
            if ready.any():
                idx = pick(ready, st.confidence, kl, cfg.klass_pick, ctx.runner.generator)
                ctx.commit(idx, st.candidate[idx], Reason.KL_STABLE)
            else:
                idx = masked_topk(st.confidence, masked, quota_at(schedule, ctx.step))
                ctx.commit(idx, st.candidate[idx], Reason.SCHEDULE)
            shown = masked.numpy() & np.isfinite(kl.numpy())
            yield ctx.emit("draft", st, kl=np.where(shown, kl.numpy(), np.nan).astype(np.float32),
                           kl_stable=(stable & masked).numpy(), klass_ready=int(ready.sum()), kl_eps=float(cfg.kl_eps))
