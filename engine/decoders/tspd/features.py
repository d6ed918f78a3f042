"""[PROPOSED] Per-position trajectory state of the active block and the 14 TSPD features."""

from __future__ import annotations

import numpy as np

FEATURES = ("confidence", "entropy", "margin", "conf_momentum", "entropy_momentum", "window_mean_conf",
            "window_min_conf", "stability", "oscillation", "rel_position", "left_progress", "left_distance",
            "block_progress", "history")
F = {name: i for i, name in enumerate(FEATURES)}  # column of each feature in the (L, 14) matrix


def _slope(w: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Least-squares slope over the last n valid entries of each row of w (k columns, oldest first)."""
    k = w.shape[1]
    t = np.arange(k, dtype=np.float64)
    valid = t[None, :] >= (k - n)[:, None]
    cnt = valid.sum(1)
    tm = np.where(valid, t, 0).sum(1) / np.maximum(cnt, 1)
    wm = np.where(valid, w, 0).sum(1) / np.maximum(cnt, 1)
    num = np.where(valid, (t - tm[:, None]) * (w - wm[:, None]), 0).sum(1)
    den = np.where(valid, (t - tm[:, None]) ** 2, 0).sum(1)
    return np.where(den > 0, num / np.maximum(den, 1e-12), 0.0)


class Trajectories:
    """Ring buffers (window k) of confidence, entropy, margin and candidate for the L positions of a block."""

    def __init__(self, L: int, k: int = 4):
        self.L, self.k = L, k
        self.conf = np.zeros((L, k))
        self.ent = np.zeros((L, k))
        self.margin = np.zeros((L, k))
        self.cand = np.full((L, k), -1, np.int64)
        self.n = np.zeros(L, np.int64)          # observations so far
        self.stab = np.zeros(L, np.int64)       # consecutive steps with an unchanged candidate
        self.flipped = np.zeros(L, bool)        # candidate changed at the latest observation

    def push(self, observe: np.ndarray, conf, ent, margin, cand) -> None:
        o = observe
        prev = self.cand[o, -1]
        for buf, v in ((self.conf, conf), (self.ent, ent), (self.margin, margin), (self.cand, cand)):
            buf[o] = np.roll(buf[o], -1, axis=1)
            buf[o, -1] = np.asarray(v)[o]
        first = self.n[o] == 0
        for buf in (self.conf, self.ent, self.margin, self.cand):  # pad missing history with the first value
            buf[np.flatnonzero(o)[first], :-1] = buf[np.flatnonzero(o)[first], -1:]
        same = (self.cand[o, -1] == prev) & ~first
        self.flipped[:] = False
        self.flipped[np.flatnonzero(o)] = ~same & ~first
        self.stab[o] = np.where(same, self.stab[o] + 1, 1)
        self.n[o] += 1

    def flips_in_window(self) -> np.ndarray:
        """Candidate changes among the last min(n, k) observations."""
        w = self.cand
        changes = (w[:, 1:] != w[:, :-1])
        valid = np.arange(1, self.k)[None, :] >= (self.k - np.minimum(self.n, self.k))[:, None]
        return (changes & valid).sum(1)

    def features(self, decoded: np.ndarray, B: int) -> np.ndarray:
        """(L, 14) features; ``decoded`` (L,) marks non-masked positions of the block (prompt tail included)."""
        L, k = self.L, self.k
        n = np.minimum(self.n, k)
        idx = np.arange(L)
        valid = np.arange(k)[None, :] >= (k - n)[:, None]
        mean_c = np.where(valid, self.conf, 0).sum(1) / np.maximum(n, 1)
        min_c = np.where(valid, self.conf, np.inf).min(1)
        min_c = np.where(np.isfinite(min_c), min_c, 0.0)
        left_dec = np.concatenate([[0], np.cumsum(decoded)[:-1]])               # decoded in [0, i)
        progress = np.where(idx == 0, 1.0, left_dec / np.maximum(idx, 1))
        last_left = np.full(L, -1)                                              # -1 = previous block / prompt
        cur = -1
        for i in range(L):
            last_left[i] = cur
            if decoded[i]:
                cur = i
        dist = (idx - last_left) / B
        return np.stack([
            self.conf[:, -1], self.ent[:, -1], self.margin[:, -1],
            _slope(self.conf, n), _slope(self.ent, n), mean_c, min_c,
            np.minimum(self.stab, k) / k, self.flips_in_window() / max(1, k - 1),
            idx / max(1, B - 1), progress, dist, np.full(L, decoded.mean()), n / k,
        ], 1).astype(np.float32)
