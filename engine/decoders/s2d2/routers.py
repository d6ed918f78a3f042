"""Routers: whether to spend a verify forward at this step. Each decision records every input it used.

always / never       fixed policies (``never`` is exactly the dynamic-threshold decoder)
span                 verify iff |C_t| >= tau_span
score                verify iff s >= tau_score, s = K̂ − c (static) or K̂ − c·N_hi (dynamic)
hysteresis           on/off state kept across steps and blocks of one generation: off -> on iff s > tau_on
                     (strict, as the released code runs its experiments; the paper writes >=),
                     on -> off iff s < tau_off (tau_on > tau_off)
ucb                  two-armed contextual bandit {skip, verify} over buckets of (span length, block progress,
                     mean span entropy); reward = tokens committed / forwards spent (1 or 2)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.decoders.s2d2.card import ROUTERS  # noqa: F401  (the names, defined once)


@dataclass
class RouterInputs:
    span_len: int
    block_len: int
    progress: float          # tokens decoded in the block before this step / B (the prompt tail not counted)
    alpha: list[float]
    k_hat: float
    n_hi: int
    score: float
    mean_entropy: float      # mean normalised entropy H / ln V of the draft distribution over the span


class Router:
    name = "base"

    def reset(self) -> None:
        """Start of a generation."""

    def decide(self, x: RouterInputs) -> tuple[bool, dict]:
        raise NotImplementedError

    def update(self, verified: bool, committed: int) -> None:
        """After the step: what the decision bought."""


class Always(Router):
    name = "always"

    def decide(self, x):
        return x.span_len > 0, {}


class Never(Router):
    name = "never"

    def decide(self, x):
        return False, {}


class MinSpan(Router):
    name = "span"

    def __init__(self, tau_span: int):
        self.tau_span = tau_span

    def decide(self, x):
        return x.span_len >= self.tau_span and x.span_len > 0, {"tau_span": self.tau_span}


class ScoreThreshold(Router):
    name = "score"

    def __init__(self, tau_score: float):
        self.tau_score = tau_score

    def decide(self, x):
        return x.score >= self.tau_score, {"tau_score": self.tau_score}


class Hysteresis(Router):
    name = "hysteresis"

    def __init__(self, tau_on: float, tau_off: float):
        if not tau_on > tau_off:
            raise ValueError("hysteresis needs tau_on > tau_off")
        self.tau_on, self.tau_off = tau_on, tau_off
        self.on = False

    def reset(self):
        self.on = False

    def decide(self, x):
        before = self.on
        self.on = (x.score >= self.tau_off) if self.on else (x.score > self.tau_on)
        return self.on, {"tau_on": self.tau_on, "tau_off": self.tau_off, "state_before": before}


def _bin(v: float, lo: float, hi: float, n: int) -> int:
    """Linear bin of v clamped to [lo, hi]; the top edge falls in the last bin (the released ``_linear_bin_idx``)."""
    if n <= 1 or hi <= lo:
        return 0
    ratio = (min(max(v, lo), hi) - lo) / (hi - lo)
    return min(n - 1, max(0, int(ratio * n)))


class UCB(Router):
    name = "ucb"
    ACTIONS = ("skip", "verify")

    def __init__(self, beta: float = 1.0, bins: int = 2):
        self.beta, self.bins = beta, bins
        self.reset()

    def reset(self):
        self.t = 0
        self.n: dict[tuple[int, int], int] = {}
        self.total: dict[tuple[int, int], float] = {}
        self._last: tuple[int, int] | None = None

    def bucket(self, x: RouterInputs) -> int:
        n = self.bins
        s = _bin(max(1, x.span_len), 1, max(1, x.block_len), n)  # |C_t| over [1, B]
        p = _bin(x.progress, 0.0, 1.0, n)                          # decoded in the block / B
        e = _bin(x.mean_entropy, 0.0, 1.0, n)                      # mean H / ln V over the span
        return (s * n + p) * n + e

    def decide(self, x):
        self.t += 1
        b = self.bucket(x)
        means, bonus, scores = {}, {}, {}
        for a in (0, 1):
            k = self.n.get((b, a), 0)
            if k == 0:
                means[a], bonus[a], scores[a] = None, None, math.inf
            else:
                means[a] = self.total[(b, a)] / k
                bonus[a] = self.beta * math.sqrt(math.log(self.t) / k) if math.log(self.t) > 0 else 0.0
                scores[a] = means[a] + bonus[a]
        verify = scores[1] >= scores[0] and x.span_len > 0
        self._last = (b, int(verify))
        info = {"bucket": b, "t": self.t, "counts": [self.n.get((b, 0), 0), self.n.get((b, 1), 0)],
                "means": [means[0], means[1]], "bonus": [bonus[0], bonus[1]],
                "ucb": [None if math.isinf(scores[0]) else scores[0], None if math.isinf(scores[1]) else scores[1]]}
        return verify, info

    def update(self, verified, committed):
        if self._last is None:
            return
        key = self._last
        self.n[key] = self.n.get(key, 0) + 1
        self.total[key] = self.total.get(key, 0.0) + committed / (2.0 if verified else 1.0)
        self._last = None



def make_router(cfg) -> Router:
    r = cfg.router
    if r == "always":
        return Always()
    if r == "never":
        return Never()
    if r == "span":
        return MinSpan(cfg.tau_span)
    if r == "score":
        return ScoreThreshold(cfg.tau_score)
    if r == "hysteresis":
        return Hysteresis(cfg.tau_on, cfg.tau_off)
    if r == "ucb":
        return UCB(cfg.ucb_beta, cfg.ucb_bins)
    raise ValueError(f"unknown router {r!r}")
