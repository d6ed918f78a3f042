"""S2D2 decoder (see ``engine.decoders.s2d2`` for the terms). One step is a pipeline of named stages over ``S2D2Step``:

    draft -> estimate (span, α, K̂, N_hi, score) -> route -> [verify_span: verify + accept] -> fallback

The fallback is SDAR's dynamic rule (``block_diffusion_generate``): if this step committed fewer than its quota k_t, commit every
still-masked position with confidence > τ if there are at least k_t - done of them, else the top ones.
``router=never`` is therefore exactly ``threshold:rule=sdar``. Parameters and presets: ``engine.catalogue.catalogue``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from engine.models import masks
from engine.catalogue.catalogue import config_class
from engine.decoders.s2d2.card import S2D2_PRESETS
from engine.decoders.schedule import block_schedule, quota_at
from engine.decoders.threshold.policy import dynamic_commit
from engine.runtime.loop import BlockContext, Policy
from engine.decoders.s2d2.estimators import alpha, expected_accepted, normalised_entropy
from engine.decoders.s2d2.routers import RouterInputs, make_router
from engine.decoders.s2d2.verify import SpanOutcome, accept, verify_logits
from engine.runtime.device import read, to_device
from engine.runtime.sampling import TokenStats, transformed_probs
from engine.records.trace import Reason, Verdict
from engine.decoders.s2d2.card import S2D2DraftFields, S2D2Summary, S2D2VerifyFields


@dataclass
class S2D2Step:
    """What one step knows, filled stage by stage."""
    quota: int                               # k_t of the block's schedule
    masked: torch.Tensor                     # (L,) masked before the step
    st: TokenStats | None = None             # draft statistics
    p: torch.Tensor | None = None            # (L, V) draft distribution (sampling transform applied)
    draft_mask: torch.Tensor | None = None   # (L, L) in-block drafting mask
    span: torch.Tensor | None = None         # block-relative indices of the first masked span
    inputs: RouterInputs | None = None
    verify: bool = False
    router: dict = field(default_factory=dict)
    q_top: torch.Tensor | None = None        # (L,) the verifier's argmax
    outcome: SpanOutcome | None = None
    done: int = 0                            # tokens committed by this step so far
    decoded: int = 0                         # tokens decoded in this block before the step (prompt tail not counted)


def first_span(masked: torch.Tensor) -> torch.Tensor:
    """Block-relative indices of the first contiguous run of masked positions."""
    idx = masked.nonzero()[:, 0]
    if len(idx) == 0:
        return idx
    f = int(idx[0])
    end = f
    while end < len(masked) and masked[end]:
        end += 1
    return torch.arange(f, end)


def span_slice(span: torch.Tensor) -> slice:
    """A contiguous span's rows as a slice (a view of a device tensor, where a host index would copy up)."""
    return slice(int(span[0]), int(span[-1]) + 1) if len(span) else slice(0, 0)


def verdict_arrays(L: int, span: torch.Tensor, v: SpanOutcome, reasons: np.ndarray) -> dict:
    """Per-position verify outcome for the trace: verdict codes, acceptance ratio, p(x̂) and q(x̂)."""
    verdict = np.full(L, int(Verdict.UNTOUCHED), np.int8)
    verdict[span.numpy()] = Verdict.PENDING
    verdict[span[:v.accepted].numpy()] = Verdict.ACCEPTED
    if v.rejected_at is not None:
        verdict[int(span[v.rejected_at])] = Verdict.RESAMPLED
    verdict[reasons == int(Reason.FALLBACK)] = Verdict.FALLBACK
    seen = span[:len(v.ratios)].numpy()
    out = dict(verdict=verdict)
    for key, values in (("ratio", v.ratios), ("p_draft", v.p_draft), ("q_draft", v.q_draft)):
        arr = np.full(L, np.nan, np.float32)
        arr[seen] = values
        out[key] = arr
    return out


class S2D2Policy(Policy):
    name = "s2d2"
    config_cls = config_class("s2d2")
    presets = S2D2_PRESETS

    def __init__(self, cfg):
        super().__init__(cfg)
        self.router = make_router(cfg)
        self.accepted = 0

    @property
    def prefix_causal(self) -> bool:
        return self.cfg.cache_ver

    def start(self, runner) -> None:
        self.router.reset()
        self.accepted = 0

    def summary(self, runner) -> S2D2Summary:
        return S2D2Summary(accepted_tokens=self.accepted, verify_forwards=runner.nfe.get("verify", 0))

    def run_block(self, ctx: BlockContext):
        B = self.cfg.block_size
        schedule = block_schedule(B, self.cfg.steps or B)
        n_draft, n_open = 0, int(ctx.masked.sum())
        while ctx.masked.any():
            s = S2D2Step(quota=quota_at(schedule, n_draft), masked=ctx.masked.clone(),
                         decoded=n_open - int(ctx.masked.sum()))
            n_draft += 1
            yield from self.draft(ctx, s)
            yield from self.estimate(s)
            self.route(ctx, s)
            if not s.verify:
                s.done = self.fallback(ctx, s)
            yield ctx.emit("draft", s.st, S2D2DraftFields(router=s.router, verified=s.verify,
                                                             attn_mask=s.draft_mask.numpy()))
            if s.verify:
                yield from self.verify_span(ctx, s)
                s.done += self.fallback(ctx, s)
            self.router.update(s.verify, s.done)
            if s.verify:
                yield ctx.emit("verify", None, self.verify_fields(ctx, s))

    # ---- stages ----------------------------------------------------------------------------------------------
    def draft(self, ctx: BlockContext, s: S2D2Step):
        """The block-diffusion forward (partial-causal in-block mask with ``draft_ver``)."""
        block_mask = None
        if self.cfg.draft_ver:
            block_mask = torch.from_numpy(masks.partial_causal_draft(0, ctx.L, int(s.masked.nonzero()[0, 0])))
        logits, s.st = yield from ctx.draft(block_mask)
        s.draft_mask = block_mask if block_mask is not None else torch.ones(ctx.L, ctx.L, dtype=torch.bool)
        # (L, V); greedy: the plain softmax, which the round's statistics already made (the same bits)
        s.p = s.st.probs if self.cfg.temperature <= 0 else self._transform(ctx.runner, logits)

    def estimate(self, s: S2D2Step):
        """Span, α per span position, K̂, N_hi and the router's score (α and the entropy reduced on the device,
        read with the round's other rules)."""
        c = self.cfg
        s.span = first_span(s.masked)
        p_span = s.p[span_slice(s.span)]                                              # (S, V)
        sampled_p = p_span.gather(-1, to_device(s.st.candidate[s.span, None], p_span))[:, 0]   # p(x̂), drafted
        ent = normalised_entropy(p_span)                                              # (S,), on the device
        a, ent = yield from read(alpha(p_span, c.estimator, c.beta, c.tau_m, c.rho, sampled_p=sampled_p), ent)
        k_hat = expected_accepted(a)
        n_hi = int((s.masked & (s.st.confidence > c.tau)).sum())
        score = k_hat - c.cost * (n_hi if c.score_type == "dynamic" else 1.0) if len(s.span) else float("-inf")
        # UCB context as the released code builds it: block length B, progress = decoded / B
        s.inputs = RouterInputs(span_len=len(s.span), block_len=c.block_size, progress=s.decoded / c.block_size,
                                alpha=a.tolist(), k_hat=k_hat, n_hi=n_hi, score=score,
                                mean_entropy=float(ent.mean()) if len(s.span) else 0.0)

    def route(self, ctx: BlockContext, s: S2D2Step) -> None:
        """Whether to pay for a verify forward; the record keeps every input of the decision."""
        c, x = self.cfg, s.inputs
        s.verify, info = self.router.decide(x)
        span = [int(ctx.lo + s.span[0]), len(s.span)] if len(s.span) else None
        s.router = dict(router=c.router, decision=bool(s.verify), span=span, alpha=x.alpha, k_hat=x.k_hat,
                        n_hi=x.n_hi, score=x.score, score_type=c.score_type, cost=c.cost, quota=s.quota, **info)

    def verify_span(self, ctx: BlockContext, s: S2D2Step):
        """One verifier forward (2L mask) and speculative acceptance over the span; commits the accepted prefix
        and the resampled token."""
        r, span, draft_tok = ctx.runner, s.span, s.st.candidate
        filled = torch.where(s.masked, draft_tok, ctx.tokens)
        q = self._transform(r, (yield from verify_logits(r, ctx.lo, ctx.hi, filled)))
        at = span_slice(span)
        v, (s.q_top,) = yield from accept(s.p[at], q[at], draft_tok[span], self.cfg.acceptance, r.generator,
                                          self.cfg.gamma, device_generator=r.device_generator, also=(q.argmax(-1),))
        ctx.commit(span[:v.accepted], draft_tok[span[:v.accepted]], Reason.ACCEPT)
        if v.rejected_at is not None:
            ctx.commit(span[v.rejected_at:v.rejected_at + 1], torch.tensor([v.token]), Reason.RESAMPLE)
        s.outcome, s.done = v, v.accepted + (v.rejected_at is not None)
        self.accepted += v.accepted

    def fallback(self, ctx: BlockContext, s: S2D2Step) -> int:
        """SDAR dynamic rule on the positions still masked, to fill this step's quota."""
        left, masked = s.quota - s.done, ctx.masked
        if left <= 0 or not masked.any():
            return 0
        idx = dynamic_commit(s.st.confidence, masked, self.cfg.tau, left)
        ctx.commit(idx, s.st.candidate[idx], Reason.FALLBACK)
        return len(idx)

    # ---- helpers ---------------------------------------------------------------------------------------------
    def verify_fields(self, ctx: BlockContext, s: S2D2Step) -> S2D2VerifyFields:
        v, span = s.outcome, s.span
        return S2D2VerifyFields(
            attn_mask=masks.verifier_2l(0, ctx.L), draft_tokens=s.st.candidate.numpy().astype(np.int32),
            q_top=s.q_top.numpy().astype(np.int32), accepted=v.accepted,
            rejected_at=int(ctx.lo + span[v.rejected_at]) if v.rejected_at is not None else None,
            resampled=v.token, span=[int(ctx.lo + span[0]), len(span)],
            **verdict_arrays(ctx.L, span, v, ctx.reasons))

    def _transform(self, runner, logits: torch.Tensor) -> torch.Tensor:
        c = self.cfg
        return transformed_probs(runner.unmaskable(logits), c.temperature, c.top_k, c.top_p)
