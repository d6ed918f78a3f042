"""The statistics every reported number carries (torch-free: the explorer imports it too).

- ``wilson``: the 95 % Wilson score interval of an accuracy k / n. Unlike the normal approximation it stays inside
  [0, 1] and is honest at k = 0 or k = n and at small n (Wilson 1927; Brown, Cai & DasGupta 2001).
- ``mcnemar``: the exact McNemar test of two decoders on the same problems and seeds. Only discordant problems
  count: b = A right and B wrong, c = the reverse; under "equally accurate" b ~ Binomial(b + c, 1/2), and the
  two-sided p-value is min(1, 2 P(X <= min(b, c))).
- ``compare``: both, phrased as the README phrases a comparison: "A beats B (p = 0.003)" or "within noise".
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Z95 = 1.959963984540054   # the standard normal's 97.5 % quantile
ALPHA = 0.05


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """95 % Wilson score interval of the proportion k / n; (0, 1) when n = 0 (nothing is known)."""
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= k <= n:
        raise ValueError(f"wilson: need 0 <= k <= n, got k={k}, n={n}")
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def binom_cdf_half(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2), exactly (integer arithmetic, then one division)."""
    if k < 0:
        return 0.0
    return sum(math.comb(n, i) for i in range(min(k, n) + 1)) / 2 ** n


def mcnemar(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value from the discordant counts b and c."""
    n = b + c
    if n == 0:
        return 1.0
    return min(1.0, 2 * binom_cdf_half(min(b, c), n))


def discordant(a: Sequence[bool], b: Sequence[bool]) -> tuple[int, int]:
    """(A right and B wrong, A wrong and B right) over paired outcomes."""
    if len(a) != len(b):
        raise ValueError(f"paired outcomes differ in length: {len(a)} vs {len(b)}")
    return sum(x and not y for x, y in zip(a, b)), sum(y and not x for x, y in zip(a, b))


def compare(name_a: str, a: Sequence[bool], name_b: str, b: Sequence[bool], alpha: float = ALPHA) -> dict:
    """A paired comparison of two decoders' per-problem outcomes (same problems, same seeds, same order)."""
    wins, losses = discordant(a, b)
    p = mcnemar(wins, losses)
    if p >= alpha:
        verdict = f"{name_a} vs {name_b}: within noise (p = {p:.2g}, {wins} vs {losses} discordant)"
    else:
        better, worse = (name_a, name_b) if wins > losses else (name_b, name_a)
        verdict = f"{better} beats {worse} (exact McNemar p = {p:.2g}, {max(wins, losses)} vs {min(wins, losses)})"
    return dict(a=name_a, b=name_b, n=len(a), a_only=wins, b_only=losses, p=p, significant=p < alpha,
                verdict=verdict)


def fmt_ci(acc: float, ci: Sequence[float]) -> str:
    """'0.953 [0.931, 0.968]': how tables print an accuracy."""
    return f"{acc:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"
