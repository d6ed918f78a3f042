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

import numpy as np
import torch

from engine.models import masks
from engine.runtime.device import host, to_device
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


def draft_probs(p: torch.Tensor, q: torch.Tensor, draft: torch.Tensor) -> np.ndarray:
    """(n, 3) on the host: p(x̂), q(x̂) and argmax q per span position, reduced where p and q (n, V) are and
    read in one copy (``engine.runtime.device``)."""
    d = to_device(draft, p)[:, None]
    return host(torch.stack([p.gather(-1, d)[:, 0], q.gather(-1, d)[:, 0], q.argmax(-1).to(p.dtype)], 1)).numpy()


def accept_stochastic(p: torch.Tensor, q: torch.Tensor, draft: torch.Tensor, generator: torch.Generator,
                      gamma: float = 1.0, zero_p: str = "clamp", device_generator: torch.Generator | None = None
                      ) -> SpanOutcome:
    """Speculative rejection sampling over a span. p, q (n, V) float64 on the model's device; draft (n,) tokens
    sampled from p.

    The committed token at each verified position is distributed exactly as q (χ²-tested): accept x̂ with
    min(1, (q/p)^γ) (γ = 1 is exact), else resample from normalize(max(q − p, 0)) (q itself if that is empty).
    A draft with p(x̂) = 0 (possible only if the draft was not sampled from p): ``zero_p="clamp"`` divides by
    max(p, 1e-12) as S2D2's code does (accepted unless q(x̂) = 0); ``"reject"`` rejects it and resamples from q,
    as SimSD's MRS does. The coins come from the host's ``generator``, the resample from the device's
    (``device_generator``, default the same): on a CPU one stream, as before.
    """
    ratios, pd, qd = [], [], []
    small = draft_probs(p, q, draft)
    for k in range(len(draft)):
        pk, qk = float(small[k, 0]), float(small[k, 1])
        r = 0.0 if (pk <= 0 and zero_p == "reject") else min(1.0, (qk / max(pk, 1e-12)) ** gamma)
        ratios.append(r), pd.append(pk), qd.append(qk)
        u = float(torch.rand((), dtype=torch.float64, generator=generator))
        if u < r:
            continue
        tok = resample(p[k], q[k], pk <= 0 and zero_p == "reject", device_generator or generator)
        return SpanOutcome(k, k, tok, ratios, pd, qd)
    return SpanOutcome(len(draft), None, None, ratios, pd, qd)


def resample(p: torch.Tensor, q: torch.Tensor, from_q: bool, generator: torch.Generator) -> int:
    """One draw from normalize(max(q − p, 0)) over (V,) rows on the device (q itself where that is empty or
    ``from_q``); one number crosses."""
    resid = (q - p).clamp_min(0)
    total = resid.sum()
    usable = host(torch.stack([total, torch.isfinite(resid).all().to(total.dtype)]))
    dist = resid / total if float(usable[0]) > 0 and bool(usable[1]) and not from_q else q
    return int(host(torch.multinomial(dist.float(), 1, generator=generator)))


def accept_greedy(q: torch.Tensor, p: torch.Tensor, draft: torch.Tensor) -> SpanOutcome:
    """Accept x̂_i iff argmax q_i = x̂_i; at the first mismatch commit argmax q_i and stop."""
    ratios, pd, qd = [], [], []
    small = draft_probs(p, q, draft)
    for k in range(len(draft)):
        x, top = int(draft[k]), int(small[k, 2])
        pd.append(float(small[k, 0])), qd.append(float(small[k, 1])), ratios.append(1.0 if top == x else 0.0)
        if top != x:
            return SpanOutcome(k, k, top, ratios, pd, qd)
    return SpanOutcome(len(draft), None, None, ratios, pd, qd)
