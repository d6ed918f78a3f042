"""Per-step commit quotas shared by LLaDA and SDAR-style rules."""

from __future__ import annotations


def transfer_schedule(n_masked: int, steps: int) -> list[int]:
    """Split n_masked commits over `steps` steps evenly, remainder front-loaded: k_j = n//S + [j < n % S]."""
    steps = max(1, min(steps, n_masked)) if n_masked else 1
    return [n_masked // steps + (1 if j < n_masked % steps else 0) for j in range(steps)]
