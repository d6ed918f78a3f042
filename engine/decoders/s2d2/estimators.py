"""Acceptance estimators α_i ∈ [0, 1] from the draft distribution p (rows of a (n, V) probability matrix)."""

from __future__ import annotations

import math

import torch

from engine.decoders.s2d2.card import ESTIMATORS  # noqa: F401  (the names, defined once)


def normalised_entropy(p: torch.Tensor) -> torch.Tensor:
    """H̃ = H(p) / ln V per row of p (n, V)."""
    p = p.double()
    return -(p * torch.log(p.clamp_min(1e-300))).sum(-1) / math.log(p.shape[-1])


def alpha(p: torch.Tensor, estimator: str, beta: float = 1.0, tau_m: float = 0.05, rho: float = 0.8,
          kappa: float = 1.0, sampled_p: torch.Tensor | None = None) -> torch.Tensor:
    """p (n, V) draft probabilities at the span -> α (n,). sampled_p (n,): p of the drafted token, which the
    confidence-power estimator uses (the released code's ``sampled_token_confidence``); default the top-1."""
    if p.numel() == 0:
        return torch.zeros(0, dtype=torch.float64)
    p = p.double()
    top2 = torch.topk(p, min(2, p.shape[-1]), dim=-1).values
    margin = top2[:, 0] - (top2[:, 1] if top2.shape[1] > 1 else 0)
    h_norm = normalised_entropy(p)
    if estimator == "entropy":          # the paper's choice: soft, exp(−β·H̃)
        return torch.exp(-beta * h_norm)
    if estimator == "margin":           # hard margin: 1[p¹ − p² > τ_m]
        return (margin > tau_m).double()
    if estimator == "hard_entropy":
        return (h_norm < 0.1).double()
    if estimator == "confidence":       # confidence power p(x̂)^ρ
        c = top2[:, 0] if sampled_p is None else sampled_p.double()
        return c.clamp(0, 1) ** rho
    if estimator == "linear_margin":
        return (kappa * margin).clamp(0, 1)
    if estimator == "renyi2":           # collision probability Σ p²
        return (p * p).sum(-1)
    raise ValueError(f"unknown estimator {estimator!r}")


def expected_accepted(a: torch.Tensor) -> float:
    """K̂ = Σ_k Π_{i≤k} α_i: the expected accepted-prefix length under independent acceptances."""
    return float(torch.cumprod(a.double(), 0).sum()) if a.numel() else 0.0
