"""The verify forward (2L trick for position-aligned models) and speculative acceptance.

Verify input, one forward against the read-only cache:
    tokens    [ y_1 … y_L | MASK … MASK ]    y = the block with every masked slot filled by its draft token
    positions [ s … s+L-1 | s … s+L-1   ]
    mask      first half token-causal (A_L); second half sees drafts before it (A_L − I) and itself (I)
so the second-half logit at i is exactly what the model predicts at i in block-size-1 mode.

Right-shifted models (Fast-dLLM v2, whose row i − 1 predicts slot i) need no second half: one token-causal forward over the draft-filled
block, whose row i − 1 predicts slot i from the tokens before it (the runner recomputes the row before the block
with it, so the block's first slot is verified too).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.models import masks
from engine.runtime.loop import Tail


def verify_logits(runner, lo: int, hi: int, filled: torch.Tensor) -> torch.Tensor:
    """filled (L,) draft-filled block -> verifier logits (L, V) at the block positions (``yield from``)."""
    L = hi - lo
    if runner.adapter.logit_shift:
        pos = torch.arange(L)
        logits, _ = yield from runner.forward("verify", lo, hi, block_mask=masks.causal(pos, pos), block_tokens=filled)
        return logits
    full = torch.from_numpy(masks.verifier_2l(0, L))  # (2L, 2L) in-block part of the 2L mask
    tail = Tail(torch.full((L,), runner.adapter.mask_token_id, dtype=torch.long), torch.arange(lo, hi),
                full[L:, :L], full[L:, L:])
    _, q_logits = yield from runner.forward("verify", lo, hi, block_mask=full[:L, :L], tail=tail, block_tokens=filled)
    return q_logits


@dataclass
class SpanOutcome:
    accepted: int                  # accepted draft tokens (prefix of the span)
    rejected_at: int | None        # span index of the first rejection (None = whole span accepted)
    token: int | None              # the resampled token at the rejection
    ratios: list[float]            # min(1, (q/p)^γ) per span position examined
    p_draft: list[float]           # p_i(x̂_i)
    q_draft: list[float]           # q_i(x̂_i)


def accept_stochastic(p: torch.Tensor, q: torch.Tensor, draft: torch.Tensor, generator: torch.Generator,
                      gamma: float = 1.0, zero_p: str = "clamp") -> SpanOutcome:
    """Speculative rejection sampling over a span. p, q (n, V) float64; draft (n,) tokens sampled from p.

    The committed token at each verified position is distributed exactly as q (χ²-tested): accept x̂ with
    min(1, (q/p)^γ) (γ = 1 is exact), else resample from normalize(max(q − p, 0)) (q itself if that is empty).
    A draft with p(x̂) = 0 (possible only if the draft was not sampled from p): ``zero_p="clamp"`` divides by
    max(p, 1e-12) as S2D2's code does (accepted unless q(x̂) = 0); ``"reject"`` rejects it and resamples from q,
    as SimSD's MRS does.
    """
    ratios, pd, qd = [], [], []
    for k in range(len(draft)):
        x = int(draft[k])
        pk, qk = float(p[k, x]), float(q[k, x])
        r = 0.0 if (pk <= 0 and zero_p == "reject") else min(1.0, (qk / max(pk, 1e-12)) ** gamma)
        ratios.append(r), pd.append(pk), qd.append(qk)
        u = float(torch.rand((), dtype=torch.float64, generator=generator))
        if u < r:
            continue
        resid = (q[k] - p[k]).clamp_min(0)
        total = float(resid.sum())
        usable = total > 0 and torch.isfinite(resid).all() and not (pk <= 0 and zero_p == "reject")
        dist = resid / total if usable else q[k]
        tok = int(torch.multinomial(dist.float(), 1, generator=generator))
        return SpanOutcome(k, k, tok, ratios, pd, qd)
    return SpanOutcome(len(draft), None, None, ratios, pd, qd)


def accept_greedy(q: torch.Tensor, p: torch.Tensor, draft: torch.Tensor) -> SpanOutcome:
    """Accept x̂_i iff argmax q_i = x̂_i; at the first mismatch commit argmax q_i and stop."""
    ratios, pd, qd = [], [], []
    for k in range(len(draft)):
        x = int(draft[k])
        top = int(q[k].argmax())
        pd.append(float(p[k, x])), qd.append(float(q[k, x])), ratios.append(1.0 if top == x else 0.0)
        if top != x:
            return SpanOutcome(k, k, top, ratios, pd, qd)
    return SpanOutcome(len(draft), None, None, ratios, pd, qd)
