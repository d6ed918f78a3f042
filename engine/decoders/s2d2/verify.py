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
from engine.runtime.device import generator_at, on_host, read, run_reads, to_device
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


def draft_probs(p: torch.Tensor, q: torch.Tensor, draft: torch.Tensor) -> torch.Tensor:
    """(n, 3) on the device: p(x̂), q(x̂) and argmax q per span position, from p and q (n, V) there."""
    d = to_device(draft, p)[:, None]
    return torch.stack([p.gather(-1, d)[:, 0], q.gather(-1, d)[:, 0], q.argmax(-1).to(p.dtype)], 1)


@dataclass
class Resamples:
    """The token a rejection at each span position would commit, drawn on the device before the coins (on the
    host, after the read) say where a rejection falls, so that the span is read in one copy (as vLLM's rejection
    sampler draws its recovered tokens); on the host, where a read costs no wait, only the one used is drawn (S × V
    numbers drawn ahead took 40 ms at S = 8, V = 151 936 on one CPU thread, one draw 5 ms). Each draw starts from the device generator's state as drawing only that
    one would find it (after the coins before it, where the host's generator is the device's: the CPU), and
    ``after[k]`` is the state it left, which the decode's generator takes when position k is the one used: the
    stream, and so every seeded token, is what drawing at the rejection alone gave."""
    tokens: torch.Tensor             # (n,) on the device until read
    after: list                      # n generator states

    @classmethod
    def draw(cls, p: torch.Tensor, q: torch.Tensor, from_q: torch.Tensor, generator: torch.Generator,
             device_generator: torch.Generator) -> "Resamples":
        """from_q (n,) bool on the device: draw from q itself (SimSD's MRS at p(x̂) = 0)."""
        shared, coins_at = device_generator is generator, generator.get_state()
        start = device_generator.get_state()
        tokens, after = [], []
        for k in range(len(p)):
            if shared:                               # coin k is drawn before a rejection at k is resampled
                torch.rand((), dtype=torch.float64, generator=generator)
            g = generator_at(device_generator, generator.get_state() if shared else start)
            tokens.append(resample(p[k], q[k], from_q[k], g))
            after.append(g.get_state())
        generator.set_state(coins_at)                # the coins are drawn for real after the read
        return cls(torch.stack(tokens) if tokens else torch.zeros(0, dtype=torch.long), after)


def accept(p: torch.Tensor, q: torch.Tensor, draft: torch.Tensor, acceptance: str, generator: torch.Generator,
           gamma: float = 1.0, zero_p: str = "clamp", device_generator: torch.Generator | None = None,
           also: tuple = ()):
    """Speculative acceptance over a span (a generator: ``v, also = yield from accept(...)``): p, q (n, V) float64
    on the model's device, draft (n,) host tokens; what it needs of the device, and the caller's ``also`` (small
    device tensors), is read in one ``Read``. Returns the ``SpanOutcome`` and ``also`` on the host.

    ``stochastic``: the committed token at each verified position is distributed exactly as q (χ²-tested): accept
    x̂ with min(1, (q/p)^γ) (γ = 1 is exact), else resample from normalize(max(q − p, 0)) (q itself if that is
    empty). A draft with p(x̂) = 0 (possible only if the draft was not sampled from p): ``zero_p="clamp"`` divides
    by max(p, 1e-12) as S2D2's code does (accepted unless q(x̂) = 0); ``"reject"`` rejects it and resamples from
    q, as SimSD's MRS does. The coins come from the host's ``generator``, the resample from the device's
    (``device_generator``, default the same): on a CPU one stream, as before. ``greedy``: accept x̂_i iff argmax
    q_i = x̂_i; at the first mismatch commit argmax q_i and stop."""
    small = draft_probs(p, q, draft)
    if acceptance == "greedy":
        small, *also = yield from read(small, *also)
        return accept_greedy(small.numpy(), draft), also
    device_generator = device_generator or generator
    ahead = None if on_host(p) else \
        Resamples.draw(p, q, (small[:, 0] <= 0) & (zero_p == "reject"), generator, device_generator)
    small, tokens, *also = yield from read(small, ahead.tokens if ahead else small[:0, 0], *also)
    ratios, pd, qd = [], [], []
    for k in range(len(draft)):
        pk, qk = float(small[k, 0]), float(small[k, 1])
        r = 0.0 if (pk <= 0 and zero_p == "reject") else min(1.0, (qk / max(pk, 1e-12)) ** gamma)
        ratios.append(r), pd.append(pk), qd.append(qk)
        u = float(torch.rand((), dtype=torch.float64, generator=generator))
        if u < r:
            continue
        if ahead is None:            # on the host a draw costs no wait: only the one at the rejection (V numbers)
            token = int(resample(p[k], q[k], torch.tensor(pk <= 0 and zero_p == "reject"), device_generator))
        else:
            device_generator.set_state(ahead.after[k])
            token = int(tokens[k])
        return SpanOutcome(k, k, token, ratios, pd, qd), also
    return SpanOutcome(len(draft), None, None, ratios, pd, qd), also


def accept_stochastic(p: torch.Tensor, q: torch.Tensor, draft: torch.Tensor, generator: torch.Generator,
                      gamma: float = 1.0, zero_p: str = "clamp", device_generator: torch.Generator | None = None
                      ) -> SpanOutcome:
    """``accept`` with ``stochastic`` acceptance, read at once (outside the engine loop)."""
    return run_reads(accept(p, q, draft, "stochastic", generator, gamma, zero_p, device_generator))[0]


def resample(p: torch.Tensor, q: torch.Tensor, from_q: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One draw, on the device, from normalize(max(q − p, 0)) over (V,) rows (q itself where that is empty or
    ``from_q``): ``torch.multinomial(dist, 1)``'s own method (the argmax of dist / Exp(1) noise, the same noise from
    the same generator, so the same token) without its two checks of the distribution on the host."""
    resid = (q - p).clamp_min(0)
    total = resid.sum()
    usable = (total > 0) & torch.isfinite(resid).all() & ~from_q
    dist = torch.where(usable, resid / total, q).float()
    return (dist / torch.empty_like(dist).exponential_(1, generator=generator)).argmax(-1)


def accept_greedy(small: np.ndarray, draft: torch.Tensor) -> SpanOutcome:
    """Greedy acceptance over ``draft_probs``' (n, 3) on the host."""
    ratios, pd, qd = [], [], []
    for k in range(len(draft)):
        x, top = int(draft[k]), int(small[k, 2])
        pd.append(float(small[k, 0])), qd.append(float(small[k, 1])), ratios.append(1.0 if top == x else 0.0)
        if top != x:
            return SpanOutcome(k, k, top, ratios, pd, qd)
    return SpanOutcome(len(draft), None, None, ratios, pd, qd)
