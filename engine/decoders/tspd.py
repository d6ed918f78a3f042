"""TSPD + CE decoder ([PROPOSED] reconstruction, spec §3.6; see ``engine.ce`` for the terms).

Each step is a pipeline of named stages over the block's masked positions M:

    draft -> observe (trajectories, Kalman update) -> features -> controller (F1)
          -> look-ahead (F2: LCB at the risk-aware horizon clears logit(τ)) -> classify
          -> stabilise (veto oscillating tokens; F3 = oscillating tokens whose window-averaged distribution is
             confident) -> progress guarantee (nothing chosen: the best-scored position) -> commit
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from engine.ce.controller import CARD_FILE, MLPController, heuristic_fix
from engine.ce.features import F, Trajectories
from engine.ce.kalman import KalmanParams, TrendFilter, logit
from engine.loop import BlockContext, CommonConfig, ConfigError, Policy
from engine.trace import Reason

CE_FILE = "ce.json"
CLASSES = ("none", "converging", "oscillatory", "stalled", "stable_high")
CONVERGING, OSCILLATORY, STALLED, STABLE_HIGH = 1, 2, 3, 4


@dataclass
class TSPDConfig(CommonConfig):
    block_size: int = 16
    tau: float = 0.9              # the confidence the look-ahead must reach, z_tau = logit(tau)
    controller: str = "mlp"       # mlp | heuristic
    tau_s: float = 0.0            # controller threshold (0 = the calibrated one from the controller's card)
    ce: bool = True               # confidence extrapolation (look-ahead) on/off
    kappa: float = 1.64           # LCB width in forecast standard deviations
    h_max: int = 4
    window: int = 4
    sigma_ref: float = 1.0
    s_min: int = 2
    stabilise: bool = True
    tau_hard: float = 0.99
    tau_stab: float = 0.9
    alpha: float = 0.1            # heuristic: bar relaxed by alpha * left-context progress
    q_level: float = 0.0          # Kalman noise (0 = fitted values from the model's ce.json, else defaults)
    q_vel: float = 0.0
    r: float = 0.0

    def validate(self) -> None:
        super().validate()
        checks = [(0.0 < self.tau < 1.0, "tau must be in (0, 1)"),
                  (self.controller in ("mlp", "heuristic"), "controller must be mlp or heuristic"),
                  (0.0 <= self.tau_s < 1.0, "tau_s must be in [0, 1)"),
                  (0.0 <= self.kappa <= 10.0, "kappa must be in 0..10"),
                  (0 <= self.h_max <= 32, "h_max must be in 0..32"),
                  (2 <= self.window <= 16, "window must be in 2..16"),
                  (self.sigma_ref > 0, "sigma_ref must be > 0"),
                  (min(self.q_level, self.q_vel, self.r) >= 0, "Kalman noise must be >= 0")]
        for ok, msg in checks:
            if not ok:
                raise ConfigError(msg)


def kalman_params(cfg: TSPDConfig, model_dir: Path | None) -> KalmanParams:
    fitted = {}
    if model_dir is not None and (model_dir / CE_FILE).exists():
        import json
        fitted = json.loads((model_dir / CE_FILE).read_text()).get("params", {})
    base = KalmanParams(**fitted) if fitted else KalmanParams()
    return KalmanParams(cfg.q_level or base.q_level, cfg.q_vel or base.q_vel, cfg.r or base.r)


class TSPDPolicy(Policy):
    name = "tspd"
    config_cls = TSPDConfig

    def start(self, runner) -> None:
        model_dir = getattr(runner.adapter, "path", None)
        self.kparams = kalman_params(self.cfg, model_dir)
        self.controller = None
        if self.cfg.controller == "mlp":
            if model_dir is None or not (model_dir / CARD_FILE).exists():
                raise ConfigError("this model has no trained TSPD controller; use controller=heuristic")
            self.controller = MLPController.load(model_dir)
        self.tau_s = self.cfg.tau_s or (self.controller.threshold if self.controller else 0.0)

    def run_block(self, ctx: BlockContext):
        cfg, L, B = self.cfg, ctx.L, self.cfg.block_size
        traj = Trajectories(L, cfg.window)
        kf = TrendFilter(L, self.kparams)
        probs_hist: list[np.ndarray] = []                  # last `window` (L, V) distributions
        innov_sign = np.zeros((L, 4), np.int8)
        stall = np.zeros(L, np.int64)
        prev_lcb = np.full(L, -np.inf)
        z_tau = float(logit(cfg.tau))
        hs = np.arange(1, cfg.h_max + 1)
        while ctx.masked.any():
            _, st = ctx.draft()
            masked = ctx.masked.numpy()
            conf = st.confidence.numpy().astype(np.float64)
            cand = st.candidate.numpy()
            # observe
            traj.push(masked, conf, st.entropy.numpy(), st.margin.numpy(), cand)
            kf.step(logit(conf), masked, traj.flipped)
            innov_sign[masked] = np.roll(innov_sign[masked], -1, 1)
            innov_sign[masked, -1] = np.sign(kf.innov[masked]).astype(np.int8)
            probs_hist = (probs_hist + [st.probs.float().numpy()])[-cfg.window:]
            feats = traj.features(~masked, B)
            # controller
            if self.controller is not None:
                score = self.controller.score(feats)
                f1 = masked & (score >= self.tau_s)
            else:
                score = conf.copy()
                f1 = masked & heuristic_fix(feats, cfg.tau, cfg.alpha, cfg.s_min, cfg.window)
            # look-ahead at the risk-aware horizon
            level, vel = kf.s[:, 0].copy(), kf.s[:, 1].copy()
            u = np.minimum(1.0, np.sqrt(kf.P[:, 0, 0]) / cfg.sigma_ref)
            horizon = np.clip(np.rint(cfg.h_max * feats[:, F["left_progress"]] * (1 - u)), 0, cfg.h_max).astype(np.int64)
            mean_h, std_h = kf.forecast(horizon)
            lcb_h = mean_h - cfg.kappa * std_h
            f2 = (cfg.ce & masked & ~f1 & (horizon >= 1) & (lcb_h >= z_tau) & (vel >= 0)
                  & (traj.stab >= cfg.s_min))
            # classify
            flips = traj.flips_in_window()
            sign_changes = (innov_sign[:, 1:] * innov_sign[:, :-1] < 0).sum(1)
            osc = masked & ((flips >= 2) | (sign_changes >= 3))
            stall = np.where(masked & (level < 0) & (vel <= 0.05), stall + 1, 0)
            klass = np.zeros(L, np.int8)
            klass[masked & (conf >= cfg.tau)] = STABLE_HIGH
            klass[masked & (vel > 0) & (lcb_h > prev_lcb)] = CONVERGING
            klass[stall >= 3] = STALLED
            klass[osc] = OSCILLATORY
            prev_lcb = np.where(masked, lcb_h, prev_lcb)
            # stabilise
            f3 = np.zeros(L, bool)
            stab_tok = cand.copy()
            if cfg.stabilise:
                soft = osc & (conf < cfg.tau_hard)
                f1, f2 = f1 & ~soft, f2 & ~soft
                pbar = np.mean(probs_hist, 0)                                  # (L, V)
                stab_tok = pbar.argmax(-1)
                f3 = osc & ~f1 & ~f2 & (pbar.max(-1) >= cfg.tau_stab) & (stab_tok != ctx.runner.adapter.mask_token_id)
            # progress guarantee
            forced = np.zeros(L, bool)
            if not (f1 | f2 | f3).any():
                order = np.lexsort((np.arange(L), -conf, -np.where(masked, score, -np.inf)))
                forced[order[0]] = True
            for sel, why, toks in ((f1, Reason.TSPD, cand), (f2, Reason.CE_LOOKAHEAD, cand),
                                   (f3, Reason.STABILISED, stab_tok), (forced, Reason.FORCED_PROGRESS, cand)):
                idx = np.flatnonzero(sel)
                ctx.commit(torch.from_numpy(idx), torch.from_numpy(toks[idx]), why)
            fc = [kf.forecast(h) for h in hs]
            f_mean = np.stack([m for m, _ in fc], 1) if fc else np.zeros((L, 0))
            f_std = np.stack([s for _, s in fc], 1) if fc else np.zeros((L, 0))
            nan_un = lambda a: np.where(masked[:, None] if a.ndim == 2 else masked, a, np.nan).astype(np.float32)
            yield ctx.emit("draft", st, features=nan_un(feats), score=nan_un(score), level=nan_un(level),
                           velocity=nan_un(vel), cov=nan_un(kf.P.reshape(L, 4)[:, [0, 1, 3]]),
                           forecast_mean=nan_un(f_mean), forecast_std=nan_un(f_std),
                           forecast_lcb=nan_un(f_mean - cfg.kappa * f_std), horizon=np.where(masked, horizon, -1),
                           lcb_h=nan_un(lcb_h), klass=np.where(masked, klass, -1).astype(np.int8),
                           z=nan_un(logit(conf)), z_tau=z_tau, tau_s=self.tau_s, kappa=cfg.kappa)
