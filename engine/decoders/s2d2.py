"""S2D2 decoder (see ``engine.s2d2`` for the terms). One step is a pipeline of named stages:

    draft -> span -> estimate (α, K̂, N_hi, score) -> route -> [verify -> accept] -> fallback -> update router

The fallback is SDAR's dynamic rule (spec §1.3): if this step committed fewer than its quota k_t, commit every
still-masked position with confidence > τ if there are at least k_t - done of them, else the top ones.
``router=never`` is therefore exactly ``threshold:rule=sdar``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from engine import masks
from engine.decoders.schedule import transfer_schedule
from engine.decoders.threshold import dynamic_commit
from engine.loop import BlockContext, CommonConfig, ConfigError, Policy
from engine.s2d2.estimators import ESTIMATORS, alpha, expected_accepted
from engine.s2d2.routers import ROUTERS, RouterInputs, make_router
from engine.s2d2.verify import accept_greedy, accept_stochastic, verify_logits
from engine.sampling import transformed_probs
from engine.trace import Reason

# verdict codes per position in a verify record
UNTOUCHED, ACCEPTED, RESAMPLED, FALLBACK_COMMIT, PENDING = 0, 1, 2, 3, 4

PRESETS = {
    # the paper's SDAR configs (README of phymhan/S2D2)
    "sdar-a": dict(block_size=4, router="score", score_type="static", tau_score=0.0, cost=1.0, tau=0.85,
                   estimator="entropy", beta=1.0, draft_ver=True, cache_ver=True),
    "sdar-b": dict(block_size=16, router="score", score_type="static", tau_score=0.0, cost=0.0, tau=0.85,
                   estimator="entropy", beta=1.0, draft_ver=True, cache_ver=True),
    # the seed article's operating points
    "quality": dict(block_size=4, router="span", tau_span=2, estimator="entropy", beta=0.7),
    "speed": dict(block_size=16, router="hysteresis", tau_on=1.0, tau_off=-2.0, estimator="entropy"),
}


@dataclass
class S2D2Config(CommonConfig):
    preset: str = ""
    tau: float = 0.9                 # base (fallback) threshold, and the N_hi cut
    steps: int = 0                   # denoising steps per block for the quota schedule (0 = block_size)
    router: str = "score"
    estimator: str = "entropy"
    beta: float = 1.0                # entropy estimator sharpness
    tau_m: float = 0.05              # margin estimator threshold
    rho: float = 0.8                 # confidence-power estimator exponent
    cost: float = 1.0                # c: price of a verify forward in accepted tokens
    score_type: str = "static"       # static: K̂ − c; dynamic: K̂ − c·N_hi
    tau_span: int = 2
    tau_score: float = 0.0
    tau_on: float = 1.0
    tau_off: float = -2.0
    ucb_beta: float = 1.0
    ucb_bins: int = 2
    acceptance: str = "stochastic"   # stochastic: min(1, (q/p)^γ) + residual; greedy: argmax match
    gamma: float = 1.0
    draft_ver: bool = False          # partial-causal drafting mask
    cache_ver: bool = False          # AR-like (token-causal) committed K/V

    def validate(self) -> None:
        super().validate()
        ok = [(0.0 < self.tau <= 1.0, "tau must be in (0, 1]"),
              (self.router in ROUTERS, f"router must be one of {', '.join(ROUTERS)}"),
              (self.estimator in ESTIMATORS, f"estimator must be one of {', '.join(ESTIMATORS)}"),
              (0.0 <= self.beta <= 100.0, "beta must be in 0..100"),
              (0.0 <= self.cost <= 100.0, "cost must be in 0..100"),
              (self.score_type in ("static", "dynamic"), "score_type must be static or dynamic"),
              (1 <= self.tau_span <= 64, "tau_span must be in 1..64"),
              (self.tau_on > self.tau_off, "tau_on must be greater than tau_off"),
              (self.acceptance in ("stochastic", "greedy"), "acceptance must be stochastic or greedy"),
              (0.0 < self.gamma <= 10.0, "gamma must be in (0, 10]"),
              (1 <= self.ucb_bins <= 8, "ucb_bins must be in 1..8"),
              (self.steps >= 0, "steps must be >= 0"),
              (not self.preset or self.preset in PRESETS, f"preset must be one of {', '.join(PRESETS)}")]
        for good, msg in ok:
            if not good:
                raise ConfigError(msg)


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


def verdict_arrays(L: int, span: torch.Tensor, v, reasons: np.ndarray) -> dict:
    """Per-position verify outcome for the trace: verdict codes, acceptance ratio, p(x̂) and q(x̂)."""
    verdict = np.zeros(L, np.int8)
    verdict[span.numpy()] = PENDING
    verdict[span[:v.accepted].numpy()] = ACCEPTED
    if v.rejected_at is not None:
        verdict[int(span[v.rejected_at])] = RESAMPLED
    verdict[reasons == int(Reason.FALLBACK)] = FALLBACK_COMMIT
    seen = span[:len(v.ratios)].numpy()
    out = dict(verdict=verdict)
    for key, values in (("ratio", v.ratios), ("p_draft", v.p_draft), ("q_draft", v.q_draft)):
        arr = np.full(L, np.nan, np.float32)
        arr[seen] = values
        out[key] = arr
    return out


class S2D2Policy(Policy):
    name = "s2d2"
    config_cls = S2D2Config
    presets = PRESETS

    def __init__(self, cfg: S2D2Config):
        super().__init__(cfg)
        self.router = make_router(cfg)

    def start(self, runner) -> None:
        runner.prefix_causal = self.cfg.cache_ver
        self.router.reset()
        runner.s2d2_accepted = 0

    def _transform(self, runner, logits: torch.Tensor) -> torch.Tensor:
        c = self.cfg
        return transformed_probs(runner.unmaskable(logits), c.temperature, c.top_k, c.top_p)

    def run_block(self, ctx: BlockContext):
        cfg, r = self.cfg, ctx.runner
        schedule = transfer_schedule(int(ctx.masked.sum()), cfg.steps or ctx.L)
        n_draft = 0
        while ctx.masked.any():
            quota = schedule[min(n_draft, len(schedule) - 1)]
            n_draft += 1
            masked = ctx.masked.clone()
            # draft
            block_mask = None
            if cfg.draft_ver:
                f = int(masked.nonzero()[0, 0])
                block_mask = torch.from_numpy(masks.partial_causal_draft(0, ctx.L, f))
            logits, st = ctx.draft(block_mask)
            draft_mask = (block_mask if block_mask is not None else torch.ones(ctx.L, ctx.L, dtype=torch.bool))
            p = self._transform(r, logits)                                   # (L, V)
            # span + estimate
            span = first_span(masked)
            a = alpha(p[span], cfg.estimator, cfg.beta, cfg.tau_m, cfg.rho)
            k_hat = expected_accepted(a)
            n_hi = int((masked & (st.confidence > cfg.tau)).sum())
            score = k_hat - cfg.cost * (n_hi if cfg.score_type == "dynamic" else 1.0) if len(span) else float("-inf")
            inputs = RouterInputs(span_len=len(span), block_len=ctx.L,
                                  progress=1.0 - float(masked.sum()) / max(1, ctx.L), alpha=a.tolist(),
                                  k_hat=k_hat, n_hi=n_hi, score=score,
                                  mean_entropy=float(st.entropy[span].mean()) if len(span) else 0.0)
            # route
            verify, info = self.router.decide(inputs)
            router_rec = dict(router=cfg.router, decision=bool(verify), span=[int(ctx.lo + span[0]), len(span)]
                              if len(span) else None, alpha=inputs.alpha, k_hat=k_hat, n_hi=n_hi, score=score,
                              score_type=cfg.score_type, cost=cfg.cost, quota=quota, **info)
            if not verify:
                done = self._fallback(ctx, st, quota, 0)
                self.router.update(False, done)
                yield ctx.emit("draft", st, router=router_rec, verified=False, attn_mask=draft_mask.numpy())
                continue
            yield ctx.emit("draft", st, router=router_rec, verified=True, attn_mask=draft_mask.numpy())
            # verify + accept
            draft_tok = st.candidate.clone()
            filled = torch.where(masked, draft_tok, ctx.tokens)
            q = self._transform(r, verify_logits(r, ctx.lo, ctx.hi, filled))
            if cfg.acceptance == "greedy":
                v = accept_greedy(q[span], p[span], draft_tok[span])
            else:
                v = accept_stochastic(p[span], q[span], draft_tok[span], r.generator, cfg.gamma)
            ctx.commit(span[:v.accepted], draft_tok[span[:v.accepted]], Reason.ACCEPT)
            if v.rejected_at is not None:
                ctx.commit(span[v.rejected_at:v.rejected_at + 1], torch.tensor([v.token]), Reason.RESAMPLE)
            done = v.accepted + (v.rejected_at is not None)
            r.s2d2_accepted += v.accepted
            done += self._fallback(ctx, st, quota, done)
            self.router.update(True, done)
            yield ctx.emit("verify", None, attn_mask=masks.verifier_2l(0, ctx.L),
                           draft_tokens=draft_tok.numpy().astype(np.int32),
                           q_top=q.argmax(-1).numpy().astype(np.int32), accepted=v.accepted,
                           rejected_at=int(ctx.lo + span[v.rejected_at]) if v.rejected_at is not None else None,
                           resampled=v.token, span=[int(ctx.lo + span[0]), len(span)],
                           **verdict_arrays(ctx.L, span, v, ctx._reason.numpy()))

    def summary(self, runner) -> dict:
        return dict(accepted_tokens=runner.s2d2_accepted, verify_forwards=runner.nfe.get("verify", 0))

    def _fallback(self, ctx: BlockContext, st, quota: int, done: int) -> int:
        """SDAR dynamic rule on the positions still masked, to fill this step's quota."""
        left = quota - done
        masked = ctx.masked
        if left <= 0 or not masked.any():
            return 0
        idx = dynamic_commit(st.confidence, masked, self.cfg.tau, left)
        ctx.commit(idx, st.candidate[idx], Reason.FALLBACK)
        return len(idx)
