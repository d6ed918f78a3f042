"""SimSD: two-model speculative decoding for block diffusion (the released code's rule).

A round over the block's still-masked slots (always a suffix: commits are a prefix plus a bonus):

    draft (S drafter forwards, each revealing the top-k masked slots; records each slot's step t and its p)
      -> verify (one target forward over [block: leftover | drafts D | mask copies M at D's positions] through the
         temporal mask: copy M_i sees the block as it was just before step t_i, so its logit q_i is the target's
         prediction at the step the drafter revealed i)
      -> accept (position order: greedy argmax match, or MRS min(1, q/p) with a residual bonus token; no bonus on
         full acceptance) -> commit

Both models keep their own exact block cache over the shared canvas, in lock-step through the loop's fused commit.
Where the temporal mask is exact and where it approximates: see ``verify``.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from engine.models import masks
from engine.catalogue.catalogue import config_class
from engine.decoders.s2d2.policy import verdict_arrays
from engine.decoders.schedule import masked_topk
from engine.decoders.threshold.policy import dynamic_commit
from engine.runtime.loop import BlockContext, Policy, Runner, Tail
from engine.decoders.s2d2.verify import accept
from engine.runtime.device import read, to_device
from engine.runtime.sampling import stats_on_device, transformed_probs, unpack
from engine.records.trace import Reason
from engine.decoders.simsd.card import SimSDDraftFields, SimSDSummary, SimSDVerifyFields

def verification_mask(kind: str, n_known: int, steps: np.ndarray) -> np.ndarray:
    """(L + n, L + n) over [leftover | drafts | copies] (cache columns dropped: every row sees the cache)."""
    if kind == "released":
        return masks.simsd_temporal(0, n_known, steps)
    return masks.simsd_simplified(0, n_known, len(steps))


def reveal_scores(logits: torch.Tensor, candidate: torch.Tensor, cfg) -> tuple[torch.Tensor, torch.Tensor]:
    """The drafter's p (L, V) after temperature / top-k / top-p, and p(x̂) per slot (L,), on the device: the reveal
    order reads the tempered probability of the drafted token, as the released drafter does (not the untempered
    confidence)."""
    p = transformed_probs(logits, cfg.temperature, cfg.top_k, cfg.top_p)
    return p, p.gather(-1, to_device(candidate, p)[:, None])[:, 0]


def drafted(logits: torch.Tensor, generator: torch.Generator, cfg):
    """The drafter's statistics of its logits (L, V), its p and p(x̂) (``reveal_scores``), the statistics and p(x̂)
    read with the round's other rules (a generator)."""
    small, probs = stats_on_device(logits, cfg.temperature, cfg.top_k, cfg.top_p, generator)     # (L, 4 + 2K)
    p, conf = reveal_scores(logits, small[:, 0].long(), cfg)
    small, conf = yield from read(small, conf)
    return unpack(small.numpy(), [([logits], None, probs)])[0], p, conf


def target_probs(logits: torch.Tensor) -> torch.Tensor:
    """The target's q: its plain softmax, as the released verifier computes it (no temperature, no filtering)."""
    return torch.softmax(logits.double(), dim=-1)


class SimSDPolicy(Policy):
    name = "simsd"
    config_cls = config_class("simsd")

    def start(self, runner: Runner) -> None:
        self.drafter = self.resources["drafter"]           # resolved by the caller (engine.runtime.resources)
        self.small = runner.sharing(self.drafter)           # the drafter writes and counts on this decode's canvas
        self.V = runner.adapter.vocab_size                  # the drafter's extra ids are never proposed
        self.accepted = self.verified = 0

    def run_block(self, ctx: BlockContext):
        while ctx.masked.any():
            slots = ctx.masked.nonzero()[:, 0]              # a suffix of the block
            x, step_of, p_store = ctx.tokens.clone(), np.zeros(ctx.L, np.int64), {}
            yield from self.draft(ctx, x, step_of, p_store)
            yield (yield from self.verify(ctx, slots, x, step_of, p_store))

    def draft(self, ctx: BlockContext, x: torch.Tensor, step_of: np.ndarray, p_store: dict):
        """S drafter forwards; each reveals k = ceil(masked / steps left) slots (static top-k, or the dynamic rule)."""
        c, mask_id = self.cfg, ctx.runner.adapter.mask_token_id
        S = c.draft_steps or ctx.L
        for s in range(S):
            masked = x == mask_id
            if not masked.any():
                break
            logits, _ = yield from self.small.forward("draft", ctx.lo, ctx.hi, block_tokens=x)
            logits = self.small.unmaskable(logits[:, :self.V])                            # (L, V)
            st, p, conf = yield from drafted(logits, self.small.device_generator, c)
            k = math.ceil(int(masked.sum()) / (S - s))
            reveal = (masked_topk(conf, masked, k) if c.reveal == "static"
                      else dynamic_commit(conf, masked, c.tau, k))
            for j in reveal.tolist():
                x[j], step_of[j], p_store[j] = st.candidate[j], s + 1, p[j]
            yield ctx.emit("draft", st, SimSDDraftFields(draft_tokens=x.numpy().astype(np.int32),
                                                           step_of=step_of.copy()))

    def verify(self, ctx: BlockContext, slots: torch.Tensor, x: torch.Tensor, step_of: np.ndarray, p_store: dict):
        """One target forward through the verification mask; accept in position order; commit.

        Exact vs approximate: a copy's logits equal a separate target forward on the block state before its step
        only for a one-layer target. With more layers the states of earlier-revealed reference tokens were
        computed in their own (earlier) block state, and copies attend to each other's states, which already
        saw some drafts: the replay is an approximation (measured in tests/test_simsd.py)."""
        r, L, n = ctx.runner, ctx.L, len(slots)
        n_known = L - n
        m = torch.from_numpy(verification_mask(self.cfg.mask, n_known, step_of[slots.numpy()]))
        tail = Tail(torch.full((n,), r.adapter.mask_token_id, dtype=torch.long), ctx.lo + slots,
                    to_block=m[L:, :L], to_self=m[L:, L:], from_block=m[:L, L:])
        _, q_logits = yield from r.forward("verify", ctx.lo, ctx.hi, block_mask=m[:L, :L], tail=tail, block_tokens=x)
        c = self.cfg
        q = target_probs(r.unmaskable(q_logits[:, :self.V]))                                       # (n, V)
        p = torch.stack([p_store[int(j)] for j in slots])
        d = x[slots]
        v, (q_top,) = yield from accept(p, q, d, c.acceptance, r.generator, zero_p="reject",
                                        device_generator=r.device_generator, also=(q.argmax(-1),))
        ctx.commit(slots[:v.accepted], d[:v.accepted], Reason.ACCEPT)
        if v.rejected_at is not None:
            ctx.commit(slots[v.rejected_at:v.rejected_at + 1], torch.tensor([v.token]), Reason.RESAMPLE)
        self.accepted += v.accepted
        self.verified += len(v.ratios)
        return ctx.emit("verify", None, self.verify_fields(ctx, slots, x, step_of, m, q_top, v))

    def verify_fields(self, ctx, slots, x, step_of, m, q_top, v) -> SimSDVerifyFields:
        idx = slots.numpy()
        top = np.full(ctx.L, -1, np.int32)
        top[idx] = q_top.numpy()
        return SimSDVerifyFields(
            attn_mask=m.numpy(), draft_tokens=x.numpy().astype(np.int32), step_of=step_of.copy(), q_top=top,
            accepted=v.accepted, rejected_at=int(ctx.lo + idx[v.rejected_at]) if v.rejected_at is not None else None,
            resampled=v.token, span=[int(ctx.lo + idx[0]), len(idx)],
            **verdict_arrays(ctx.L, slots, v, ctx.reasons))

    def summary(self, runner) -> SimSDSummary:
        """Forwards per model and the target-equivalent cost (drafter forwards priced by the parameter ratio; the
        measured time ratio is added by the bench from the records' wall times)."""
        t = sum(v for k, v in runner.nfe.items() if k != "draft")
        d = runner.nfe.get("draft", 0)
        ratio = sum(p.numel() for p in self.drafter.model.parameters()) / \
            sum(p.numel() for p in runner.adapter.model.parameters())
        caveat = ("MRS with a greedy (argmax) drafter is biased: its drafts are not samples of p, so min(1, q/p) "
                  "does not leave q's distribution; use acceptance=greedy or temperature > 0"
                  if self.cfg.acceptance == "mrs" and self.cfg.temperature == 0 else None)
        return SimSDSummary(drafter=self.drafter.name, target_forwards=t, draft_forwards=d, param_ratio=ratio,
                            caveat=caveat, target_equiv_nfe=t + ratio * d, accepted_tokens=self.accepted,
                            verified_tokens=self.verified,
                            acceptance_rate=self.accepted / self.verified if self.verified else None)
