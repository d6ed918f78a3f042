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

As released (``klass_as=release``, the default), by the model's family:
- LLaDA's ``stable_confident_decode`` (every model but Dream): at T > 0, p = softmax(exp(logits) / (−log u)^T) over
  Gumbel-perturbed values (u uniform, float64, drawn from the decode's generator for every scored slot), x̂ its
  argmax (a sample at temperature T) and its confidence p(x̂), near 1: KL and confidence are both read from it, so
  a slot is stable when the same token is drawn in consecutive forwards. At T = 0 p is the plain softmax. With no
  ready slot: LLaDA's quota, the most confident;
- Dream's ``_sample`` (``alg="klass"``): p is the untempered softmax at any T, x̂ its argmax, ready needs p(x̂) ≥ τ;
  with no ready slot exactly one token is committed: the slot whose ``sample_tokens`` confidence is highest (at
  T > 0 the probability of a token drawn from ``sample_tokens``' distribution: the temperature first, then top-p,
  then top-k, ``dream_sample_probs``; the decode's own draw where no filter is on, else one drawn here; at T = 0
  the top probability), written with its argmax.
``klass_as=unmask`` keeps Unmask's earlier choice on every model: p untempered and x̂ the decode's candidate, as in
every other decoder here (KL then measures the model's distribution, not two draws), and LLaDA's quota.

Where we chose:
- a slot no earlier forward scored has no KL (the reference compares with zeros: a KL of about 28 nats, never
  stable);
- the reference stops after ``steps`` forwards even if slots are left masked, and its quota may pick slots that
  are no longer masked; here the quota is capped at the masks and the block runs until it is full;
- Dream's release decodes the whole answer as one block with no per-block gate; here KLASS runs Unmask's blocks
  (``block_size``) on every model, the gate included (set block_size = gen_length for the release's one block);
- [MASK] is never a candidate: its logit is dropped before every softmax (the releases keep it in theirs).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from engine.catalogue.catalogue import config_class
from engine.decoders.schedule import masked_topk, quota_at, transfer_schedule
from engine.runtime.device import on_host, rand_like_rows, read, to_device
from engine.runtime.loop import BlockContext, Policy
from engine.runtime.sampling import filter_logits
from engine.records.trace import Reason
from engine.decoders.klass.card import KlassFields

EPS = 1e-12   # the reference's guard inside both logs


def kl_step(p_now: torch.Tensor, p_prev: torch.Tensor | None) -> torch.Tensor:
    """(L,) KL(p_now ‖ p_prev) in nats over (L, V) distributions; inf where there is no previous one."""
    if p_prev is None:
        return torch.full((p_now.shape[0],), float("inf"), dtype=torch.float64)
    return (p_now * (torch.log(p_now + EPS) - torch.log(p_prev + EPS))).sum(-1)


def ready_slots(history: torch.Tensor, conf: torch.Tensor, masked: torch.Tensor, eps: float, tau: float,
                at_least: bool = False):
    """(stable, ready) over (L, H) KL history (the last H forwards; inf where missing) and (L,) confidences;
    ``at_least``: confidence ≥ τ (Dream's release) instead of > τ (LLaDA's)."""
    stable = (history < eps).all(-1)
    return stable, stable & ((conf >= tau) if at_least else (conf > tau)) & masked


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


def perturbed_softmax(logits: torch.Tensor, u: torch.Tensor, temperature: float) -> torch.Tensor:
    """(q, V) LLaDA-KLASS's p at T > 0: softmax(exp(logits) / (−log u)^T) in float64 (``add_gumbel_noise`` then
    ``F.softmax``): its argmax is a sample at T, and with logits of a few tens it is near one-hot."""
    return torch.softmax(logits.double().exp() / (-torch.log(u.double())) ** temperature, dim=-1)


def tempered(logits: torch.Tensor, temperature: float, top_k: int, top_p: float, generator) -> torch.Tensor:
    """``perturbed_softmax`` with u uniform from the decode's device generator, drawn on the device; top-k / top-p
    (none in the release) drop entries first."""
    z = filter_logits(logits.double(), top_k, top_p)
    return perturbed_softmax(z, rand_like_rows(z.shape, generator, z), temperature)


def dream_sample_probs(logits: torch.Tensor, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    """(q, V) the distribution Dream-KLASS's ``sample_tokens`` draws from at T > 0, in its order: the temperature,
    then top-p (its ``top_p_logits``: the token that crosses p stays), then top-k, then the softmax (float64)."""
    z = logits.double() / temperature
    return torch.softmax(filter_logits(filter_logits(z, 0, top_p), top_k, 1.0), dim=-1)


class KlassPolicy(Policy):
    name = "klass"
    config_cls = config_class("klass")
    step_scoped = True          # a forward's tensors die with ``step``: only ``p_prev`` is kept between forwards
    p_prev = None               # (set by ``start``; the ledger may read ``kept`` before)

    def start(self, runner) -> None:
        release = self.cfg.klass_as == "release"
        self.dream = release and runner.adapter.model_type == "Dream"      # Dream's _sample, not LLaDA's decode
        self.gumbel = release and not self.dream and self.cfg.temperature > 0
        self.history = torch.full((runner.end, self.cfg.kl_history), float("inf"), dtype=torch.float64)  # (n, H)
        self.after_draw = None                   # the generator's state after a draw made ahead (``fallback_scores``)
        self.p_prev, self.prev_lo = None, 0      # the latest forward's distributions (q, V), from position prev_lo

    def kept(self) -> list:
        return [self.p_prev]

    def kept_estimate(self, runner, vocab: int) -> int:
        """``p_prev`` in float32: the block's rows, and on a full-attention model every row after it too."""
        rows = runner.end - runner.first_block(self.cfg.block_size) if runner.adapter.attention == "full" else \
            self.cfg.block_size
        return rows * vocab * 4

    def release(self) -> None:
        self.p_prev = None

    def distributions(self, ctx: BlockContext, logits: torch.Tensor, st) -> torch.Tensor:
        """(q, V) the p KLASS reads for the block's slots and, on a full-attention model, every slot after it."""
        r, cfg = ctx.runner, self.cfg
        rows = logits if r.later is None else torch.cat([logits, r.later.to(logits.device)])
        if self.gumbel:
            return tempered(r.unmaskable(rows), cfg.temperature, cfg.top_k, cfg.top_p, r.device_generator)
        return st.probs if r.later is None else torch.cat([st.probs, torch.softmax(r.unmaskable(r.later).double(), -1)])

    def scored(self, ctx: BlockContext, probs: torch.Tensor) -> torch.Tensor:
        """The KL of this forward's distributions (q, V) against the forward before (q,), on the device (the rule
        reads it with the round's others, then ``remember``s it). The previous forward's distributions stay there,
        in float32 (the byte ledger's ``kept``): each is exact to 6e-8 relative, so a KL moves by about 1e-7 nats,
        against an ε of 0.01. Both sides of the KL are read through that rounding, so two equal forwards give a KL of
        exactly 0 (the hand-computed cases); the KL itself is summed in float64 as before."""
        lo, kept = ctx.lo, probs.float()                                   # (q, V) float32
        kl = to_device(kl_step(probs, None), probs)                        # (q,) inf: no previous score
        if self.p_prev is not None:
            a, b = max(lo, self.prev_lo), min(lo + len(probs), self.prev_lo + len(self.p_prev))
            if b > a:
                prev = self.p_prev[a - self.prev_lo:b - self.prev_lo].double()
                kl[a - lo:b - lo] = kl_step(kept[a - lo:b - lo].double(), prev)
        self.p_prev, self.prev_lo = kept, lo
        return kl

    def remember(self, lo: int, kl: torch.Tensor) -> None:
        """The history of the slots a forward scored moves on by one, with their KL (q,) read."""
        h = self.history[lo:lo + len(kl)]
        self.history[lo:lo + len(kl)] = torch.cat([h[:, 1:], kl[:, None]], dim=1)

    def best(self, probs: torch.Tensor) -> tuple:
        """What the rule reads of p (L, V) besides the statistics: (as released) x̂ = argmax p and its p, on the
        device; nothing where it reads the decode's own statistics."""
        return tuple(probs.max(-1)) if self.gumbel or self.dream else ()

    def fallback_scores(self, ctx: BlockContext, logits, drawn, now: bool = False) -> tuple:
        """Dream's fallback at T > 0 (as released): the ``sample_tokens`` confidence of every slot (L,), on a
        device made before the rule knows whether it falls back, to be read with the rest. Where it draws (a
        filter on), the draw is made ahead from the generator's state and the stream set back: ``fallback``
        moves it on only if it is used, so the stream is the one drawing it then gave. On the host (a read costs
        no wait) nothing is made ahead: ``fallback`` makes it ``now``, where it is needed."""
        cfg, r = self.cfg, ctx.runner
        if not (self.dream and cfg.temperature > 0) or (on_host(logits) and not now):
            return ()
        p = dream_sample_probs(r.unmaskable(logits), cfg.temperature, cfg.top_k, cfg.top_p)          # (L, V)
        x = to_device(drawn.candidate, p)       # the decode's draw is from p where no filter reorders with T
        self.after_draw = None
        if cfg.top_p < 1 or cfg.top_k:
            before = r.device_generator.get_state()
            u = rand_like_rows(p.shape, r.device_generator, p)
            x = (p.log() - torch.log(-torch.log(u.clamp_min(1e-300)))).argmax(-1)           # Gumbel-max from p
            if not now:
                self.after_draw = r.device_generator.get_state()
                r.device_generator.set_state(before)
        return (p.gather(-1, x[:, None])[:, 0],)                           # the probability of that draw

    def fallback(self, ctx: BlockContext, st, scores: list, masked, schedule, logits, drawn) -> torch.Tensor:
        """No slot ready: LLaDA's quota of the most confident, or on Dream (as released) one slot, the highest
        ``sample_tokens`` confidence among the masked (``fallback_scores``: read, or made now on the host)."""
        if not self.dream:
            return masked_topk(st.confidence, masked, quota_at(schedule, ctx.step))
        if self.cfg.temperature <= 0:
            return masked_topk(st.confidence.double(), masked, 1)
        if not scores:
            scores = self.fallback_scores(ctx, logits, drawn, now=True)
        elif self.after_draw is not None:
            ctx.runner.device_generator.set_state(self.after_draw)
        return masked_topk(scores[0], masked, 1)

    def run_block(self, ctx: BlockContext):
        schedule = transfer_schedule(int(ctx.masked.sum()), self.cfg.steps or ctx.L)
        while ctx.masked.any():
            yield from self.step(ctx, schedule)

    def step(self, ctx: BlockContext, schedule):
        """One forward and its commits; its tensors go when it returns (``step_scoped``)."""
        cfg = self.cfg
        logits, drawn = yield from ctx.draft()
        probs = self.distributions(ctx, logits, drawn)
        best, fallback = self.best(probs[:ctx.L]), self.fallback_scores(ctx, logits, drawn)
        kl, *reads = yield from read(self.scored(ctx, probs), *best, *fallback)       # the rule's one read
        self.remember(ctx.lo, kl)
        kl = kl[:ctx.L]                                                      # (L,)
        st = replace(drawn, candidate=reads[1], confidence=reads[0].float()) if best else drawn
        masked = ctx.masked.clone()
        stable, ready = ready_slots(self.history[ctx.lo:ctx.hi], st.confidence.double(), masked, cfg.kl_eps,
                                    cfg.tau, at_least=self.dream)
        stable &= ctx.step >= cfg.kl_history - 1           # the reference's gate, per block
        ready &= stable
        if ready.any():
            idx = pick(ready, st.confidence, kl, cfg.klass_pick, ctx.runner.generator)
            ctx.commit(idx, st.candidate[idx], Reason.KL_STABLE)
        else:
            idx = self.fallback(ctx, st, reads[len(best):], masked, schedule, logits, drawn)
            ctx.commit(idx, st.candidate[idx], Reason.SCHEDULE)
        shown = masked.numpy() & np.isfinite(kl.numpy())
        yield ctx.emit("draft", st, KlassFields(
            kl=np.where(shown, kl.numpy(), np.nan).astype(np.float32), kl_stable=(stable & masked).numpy(),
            klass_ready=int(ready.sum()), kl_eps=float(cfg.kl_eps)))
