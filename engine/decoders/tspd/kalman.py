"""[PROPOSED] Vectorised local-linear-trend Kalman filter on z = logit(confidence), one filter per position.

    state s = [λ, ν] (level, velocity),  s' = F s + w,  F = [[1, 1], [0, 1]],  w ~ N(0, diag(q_λ, q_ν))
    observation z = λ + v,  v ~ N(0, R)
h-step forecast of the level: mean λ + hν, variance
    σ_h² = P_λλ + 2h P_λν + h² P_νν + h q_λ + q_ν h(h−1)(2h−1)/6
The prior P0 of a new (or flipped) position is ``p0 · diag(1, 0.25)``. Scaling q_λ, q_ν, R and p0 by one factor
leaves the Kalman gain and the forecast mean unchanged and scales every σ_h by its square root: that factor is
what ``tools.training.fit_ce.calibrate`` tunes so the lower bound covers what it promises.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

EPS = 1e-4
P0 = np.array([[1.0, 0.0], [0.0, 0.25]])


def logit(c) -> np.ndarray:
    c = np.clip(np.asarray(c, dtype=np.float64), EPS, 1 - EPS)
    return np.log(c / (1 - c))


@dataclass
class KalmanParams:
    q_level: float = 0.05
    q_vel: float = 0.01
    r: float = 0.25
    p0: float = 1.0

    def as_dict(self) -> dict:
        return dict(q_level=self.q_level, q_vel=self.q_vel, r=self.r, p0=self.p0)

    def scaled(self, k: float) -> "KalmanParams":
        return KalmanParams(self.q_level * k, self.q_vel * k, self.r * k, self.p0 * k)


class TrendFilter:
    """n independent filters. ``active`` marks positions that have had their first observation."""

    def __init__(self, n: int, params: KalmanParams):
        self.p = params
        self.P0 = P0 * params.p0
        self.s = np.zeros((n, 2))                 # (n, 2) [level, velocity]
        self.P = np.tile(self.P0, (n, 1, 1))      # (n, 2, 2)
        self.active = np.zeros(n, bool)
        self.innov = np.zeros(n)
        self.innov_var = np.ones(n)
        self.loglik = np.zeros(n)

    def step(self, z: np.ndarray, observe: np.ndarray, flipped: np.ndarray) -> None:
        """Update filters where ``observe``; a candidate flip resets velocity and inflates P first."""
        q = np.diag([self.p.q_level, self.p.q_vel])
        first = observe & ~self.active
        self.s[first] = np.stack([z[first], np.zeros(first.sum())], 1)
        self.P[first] = self.P0
        self.active |= first
        upd = observe & ~first
        flip = upd & flipped
        self.s[flip, 1] = 0.0
        self.P[flip] += self.P0
        if not upd.any():
            return
        s, P = self.s[upd], self.P[upd]
        s_pred = np.stack([s[:, 0] + s[:, 1], s[:, 1]], 1)                      # F s
        F = np.array([[1.0, 1.0], [0.0, 1.0]])
        P_pred = F @ P @ F.T + q                                                # (m, 2, 2)
        e = z[upd] - s_pred[:, 0]
        S = P_pred[:, 0, 0] + self.p.r
        K = P_pred[:, :, 0] / S[:, None]                                        # (m, 2)
        self.s[upd] = s_pred + K * e[:, None]
        self.P[upd] = P_pred - K[:, :, None] * P_pred[:, 0, None, :]
        self.innov[upd], self.innov_var[upd] = e, S
        self.loglik[upd] += -0.5 * (np.log(2 * math.pi * S) + e * e / S)

    def forecast(self, h) -> tuple[np.ndarray, np.ndarray]:
        """Mean and std of the level h steps ahead; h scalar or (n,) array."""
        h = np.asarray(h, dtype=np.float64)
        mean = self.s[:, 0] + h * self.s[:, 1]
        var = (self.P[:, 0, 0] + 2 * h * self.P[:, 0, 1] + h * h * self.P[:, 1, 1] + h * self.p.q_level
               + self.p.q_vel * h * (h - 1) * (2 * h - 1) / 6)
        return mean, np.sqrt(np.maximum(var, 0.0))


def run_filter(Z: np.ndarray, flips: np.ndarray, params: KalmanParams, horizons=(1, 2, 3, 4), kappa: float = 1.64):
    """Filter padded trajectories Z (n, T) (NaN = no observation) in parallel.

    Returns (total innovation log-likelihood, {h: (hits, total)}) where a hit is a realised z_{t+h} at or above
    the forecast's lower bound ẑ_{t+h} − κσ_h made at t: the calibration of the look-ahead rule.
    """
    n, T = Z.shape
    kf = TrendFilter(n, params)
    cover = {h: [0, 0] for h in horizons}
    for t in range(T):
        obs = ~np.isnan(Z[:, t])
        kf.step(np.nan_to_num(Z[:, t]), obs, flips[:, t])
        for h in horizons:
            if t + h >= T:
                continue
            later = obs & kf.active & ~np.isnan(Z[:, t + h])
            if later.any():
                mean, std = kf.forecast(h)
                cover[h][0] += int((Z[later, t + h] >= mean[later] - kappa * std[later]).sum())
                cover[h][1] += int(later.sum())
    return float(kf.loglik.sum()), cover
