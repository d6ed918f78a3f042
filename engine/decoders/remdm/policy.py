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

The release's ``p_x0``: the model's distribution with its own nucleus filter (``nucleus_p``: sorted, keep while
the running sum is at most p, the first always, renormalise; ``release_nucleus``), which every step samples from
(here at the decode's temperature, the release's T = 1; T = 0 takes its argmax) and whose renormalised probability
remdm-conf keeps for the token unmasked. A step that changed nothing (no slot filled, none re-masked) leaves the
canvas as it was, so, as the release's ``p_x0_cache``, the next step draws again from the same distribution without
a forward: its record repeats the last forward's statistics at the same NFE. Whether a step changes the canvas is
known on the host before its tokens are read (its uniforms, rates and masks decide), so a forward's step draws the
tokens of the steps that will share its forward too, in the order a step at a time draws them, and one read of the
round carries them all (``plan``): the host waits for the device at most twice a round whatever the batch.

Where we differ: the release keeps conf in bfloat16 (float32 here); its timesteps end at ε = 1e-5 and a final noise-removal forward takes the argmax; here
the last forward (s = 0) fills every slot still masked and re-masks none (for cap, rescale and conf that is what
the formulas give at s = 0; for loop it ends the block even where S is too small for the grid to reach t_off). A
finished block is final (Unmask decodes block by block), so re-masking acts on the current block only; conf's
softmax still weighs every written token of the sequence. A block whose slots are all written keeps running its S
forwards while a re-mask can still happen, as the release's sampler does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

from engine.catalogue.catalogue import config_class
from engine.decoders.schedule import masked_topk
from engine.runtime.device import rand_like_rows, read, to_device
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


def release_nucleus(probs: torch.Tensor, top_p: float, top_k: int = 0) -> torch.Tensor:
    """(q, V) the release's ``nucleus_p`` filter of a distribution: sorted, the tokens while the running sum is at
    most p (the first always), renormalised; after top-k, which the release does not have (0: off)."""
    if top_k and top_k < probs.shape[-1]:
        probs = torch.where(probs < torch.topk(probs, top_k, dim=-1).values[..., -1:], 0.0, probs)
        probs = probs / probs.sum(-1, keepdim=True)
    if top_p >= 1.0:
        return probs
    sp, idx = torch.sort(probs, descending=True, dim=-1)
    keep = sp.cumsum(-1) <= top_p
    keep[..., 0] = True
    sp = sp * keep
    return torch.zeros_like(probs).scatter(-1, idx, sp / sp.sum(-1, keepdim=True))


def draw(p_x0: torch.Tensor, temperature: float, generator: torch.Generator) -> torch.Tensor:
    """(q,) one token per row of ``p_x0`` at the temperature (Gumbel-max on log p / T, the noise drawn where
    ``p_x0`` is from the decode's device generator)."""
    u = rand_like_rows(p_x0.shape, generator, p_x0)
    return (p_x0.log() / temperature - torch.log(-torch.log(u.clamp_min(1e-300)))).argmax(-1)


@dataclass
class Planned:
    """One step drawn ahead of the read it shares with its forward (``ReMDMPolicy.plan``)."""
    j: int
    reads: tuple                   # what it reads of the device for its tokens (``ReMDMPolicy.reads``)
    masked: torch.Tensor           # (L,) the block's masked slots before it
    back: torch.Tensor             # slots it returns to [MASK]
    idx: torch.Tensor | None       # slots it fills (None: its most confident, chosen once its tokens are read)
    streams: tuple                 # the generators' states after its draws


def streams(runner) -> tuple:
    """The decode's generators' states (one on a CPU, where the host's is the device's)."""
    g, d = runner.generator, runner.device_generator
    return (g.get_state(),) if d is g else (g.get_state(), d.get_state())


def rewind(runner, states: tuple) -> None:
    """Set the generators back to ``streams``' states: a step drawn ahead is recorded where it left the stream."""
    runner.generator.set_state(states[0])
    if len(states) > 1:
        runner.device_generator.set_state(states[1])


class ReMDMPolicy(Policy):
    name = "remdm"
    config_cls = config_class("remdm")
    revises = True

    @property
    def filters(self) -> bool:
        """Whether the step reads the release's own nucleus ``p_x0`` (made on the device): sampled, or top-p /
        top-k on. Greedy without a nucleus, the shared statistics' argmax and its probability are the release's."""
        return self.cfg.temperature > 0 or self.cfg.top_p < 1 or self.cfg.top_k > 0

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

    def reads(self, st, p_x0: torch.Tensor | None, fresh: bool, generator) -> tuple:
        """What a step reads of the device for its tokens, drawn now (nothing read yet): () greedy without a filter
        (the shared statistics' argmax and probability are the release's); (p_x0 at st's candidate,) where the
        forward is this step's and no filter is on (the statistics' draw is the release's); else its draw from
        ``p_x0`` (argmax at T = 0) as (its unfiltered probability, its probability under p_x0, the token)."""
        if p_x0 is None:
            return ()
        if fresh and self.cfg.top_p >= 1 and not self.cfg.top_k:
            return (p_x0.gather(-1, to_device(st.candidate[:, None], p_x0))[:, 0].float(),)
        cand = p_x0.argmax(-1) if self.cfg.temperature <= 0 else draw(p_x0, self.cfg.temperature, generator)
        return tuple(p.gather(-1, cand[:, None])[:, 0].float() for p in (st.probs, p_x0)) + (cand,)

    @staticmethod
    def candidates(st, got: tuple):
        """The step's statistics with the tokens it would write (``candidate``, ``confidence`` their unfiltered
        probability as everywhere), and (L,) their probability under the release's ``p_x0`` (conf keeps it), from
        what ``reads`` asked for, on the host."""
        if not got:
            return st, st.confidence
        if len(got) == 1:
            return st, got[0]
        conf, p_cand, cand = got
        return replace(st, candidate=cand, confidence=conf), p_cand

    def plan(self, ctx: BlockContext, st, p_x0, j: int, steps: int) -> list[Planned]:
        """The steps from forward j on that share its forward: j, then each step after one that changes nothing
        (the release's p_x0 cache), up to one that changes the canvas or the block's end. Whether a step changes
        the canvas is known on the host before any token is read (its uniforms, rates and masks decide; its
        tokens only say what is written), so every such step draws here, in the order and from the generators a
        step at a time draws from, and the forward's one read carries them all."""
        r, cfg, out = ctx.runner, self.cfg, []
        masked, written = ctx.masked.clone(), ctx.written.clone()       # unchanged until the plan's last step
        for k in range(j, steps):
            if k > j and not masked.any() and not self.may_remask(k, steps):
                break
            reads = self.reads(st, p_x0, k == j, r.device_generator)
            sigma, fill = self.rates(ctx, k, steps, written)
            u = torch.rand(ctx.L, dtype=torch.float64, generator=r.generator).float()
            last = k == steps - 1
            back = (written & (u < sigma)).nonzero()[:, 0] if not last else torch.zeros(0, dtype=torch.long)
            idx = masked.nonzero()[:, 0] if last else (masked & (u < fill)).nonzero()[:, 0] \
                if cfg.remdm_fill == "random" else None            # confident: chosen by the read confidences
            out.append(Planned(k, reads, masked, back, idx, streams(r)))
            if len(back) or (masked.any() if idx is None else len(idx)):
                break
        return out

    def run_block(self, ctx: BlockContext):
        cfg, steps, j = self.cfg, self.cfg.steps or ctx.L, 0
        while j < steps and (ctx.masked.any() or self.may_remask(j, steps)):
            _, st = yield from ctx.draft()
            p_x0 = release_nucleus(st.probs, cfg.top_p, cfg.top_k) if self.filters else None     # (L, V)
            plan = self.plan(ctx, st, p_x0, j, steps)
            flat = [t for s in plan for t in s.reads]
            got = iter((yield from read(*flat)) if flat else ())      # the round's one read, for every step
            for s in plan:
                step, p_cand = self.candidates(st, tuple(next(got) for _ in s.reads))
                idx = s.idx if s.idx is not None else \
                    masked_topk(step.confidence, s.masked, math.ceil(int(s.masked.sum()) / (steps - s.j)))
                ctx.commit(idx, step.candidate[idx], Reason.SCHEDULE)
                self.p_at[ctx.lo + idx] = p_cand[idx]
                ctx.revise(s.back, None, Revision.REMASK)       # after the commits: a re-masked slot waits
                rewind(ctx.runner, s.streams)                    # its record keeps the stream as it left it
                yield ctx.emit("draft", step)
            j += len(plan)
