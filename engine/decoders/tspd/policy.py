"""TSPD + CE decoder ([PROPOSED] reconstruction; see ``engine.decoders.tspd`` for the terms).

Each step is a pipeline of named stages over the block's masked positions M (state in ``TSPDBlock``, the
step's results in ``TSPDStep``):

    draft -> observe (trajectories, Kalman update, features) -> control (F1: the controller says "final")
          -> forecast (F2: LCB at the risk-aware horizon clears logit(τ)) -> classify
          -> stabilise (veto oscillating tokens; F3 = oscillating tokens whose window-averaged distribution is
             confident) -> progress (nothing chosen: the best-scored position) -> commit
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from engine.catalogue.catalogue import config_class
from engine.decoders.tspd.controller import CARD_FILE, MLPController, heuristic_fix
from engine.decoders.tspd.features import F, Trajectories
from engine.decoders.tspd.kalman import KalmanParams, TrendFilter, logit
from engine.errors import ConfigError
from engine.runtime.device import read
from engine.runtime.loop import BlockContext, Policy
from engine.runtime.sampling import TokenStats
from engine.records.trace import Reason, TrajectoryClass
from engine.decoders.tspd.card import TSPDDraftFields

CE_FILE = "ce.json"


@dataclass
class TSPDBlock:
    """What persists across the steps of one block."""
    traj: Trajectories
    kf: TrendFilter
    mask_id: int                                       # never commit [MASK] as a stabilised token
    probs_hist: list = field(default_factory=list)    # last `window` (L, V) distributions, on the device
    innov_sign: np.ndarray | None = None               # (L, 4) signs of the last Kalman innovations
    stall: np.ndarray | None = None                    # (L,) consecutive stalled steps
    prev_lcb: np.ndarray | None = None                 # (L,) LCB of the previous step


@dataclass
class TSPDStep:
    st: TokenStats
    masked: np.ndarray                                 # (L,) bool
    conf: np.ndarray                                   # (L,) float64
    cand: np.ndarray                                   # (L,)
    feats: np.ndarray | None = None                    # (L, 14)
    score: np.ndarray | None = None
    horizon: np.ndarray | None = None
    lcb_h: np.ndarray | None = None
    level: np.ndarray | None = None
    vel: np.ndarray | None = None
    klass: np.ndarray | None = None
    osc: np.ndarray | None = None
    stab_tok: np.ndarray | None = None
    chosen: dict = field(default_factory=dict)         # Reason -> (L,) bool
    window_top: tuple | None = None                    # ``window_top`` on the host


def kalman_params(cfg, model_dir: Path | None) -> KalmanParams:
    fitted = {}
    if model_dir is not None and (model_dir / CE_FILE).exists():
        fitted = json.loads((model_dir / CE_FILE).read_text()).get("params", {})
    base = KalmanParams(**fitted) if fitted else KalmanParams()
    return KalmanParams(cfg.q_level or base.q_level, cfg.q_vel or base.q_vel, cfg.r or base.r, base.p0)



def window_top(hist: list) -> tuple[torch.Tensor, torch.Tensor]:
    """The window-averaged distribution's top probability and token per slot, (L,) each on the device, from the
    window's (L, V) float32 distributions there: summed in order, then divided, as numpy's mean is."""
    total = hist[0].clone()
    for p in hist[1:]:
        total += p
    top = (total / len(hist)).max(-1)
    return top.values, top.indices

class TSPDPolicy(Policy):
    name = "tspd"
    config_cls = config_class("tspd")
    step_scoped = True          # a forward's tensors die with ``step``: only the window's distributions are kept
    block: TSPDBlock | None = None

    def kept(self) -> list:
        return list(self.block.probs_hist) if self.block is not None else []

    def kept_estimate(self, runner, vocab: int) -> int:
        """The window's (L, V) float32 distributions, kept only where ``stabilise`` reads them."""
        return self.cfg.window * self.cfg.block_size * vocab * 4 if self.cfg.stabilise else 0

    def release(self) -> None:
        self.block = None

    # Training hands its in-memory controller and noise fit to the rollouts it collects (DAgger), instead of files.
    given_controller: MLPController | None = None
    given_kparams: KalmanParams | None = None

    def start(self, runner) -> None:
        model_dir = getattr(runner.adapter, "path", None)
        self.kparams = self.given_kparams or kalman_params(self.cfg, model_dir)
        self.controller = None
        if self.cfg.controller == "mlp" and self.given_controller is not None:
            self.controller = self.given_controller
        elif self.cfg.controller == "mlp":
            if model_dir is None or not (model_dir / CARD_FILE).exists():
                raise ConfigError("this model has no trained TSPD controller; use controller=heuristic")
            self.controller = MLPController.load(model_dir)
        self.tau_s = self.cfg.tau_s or (self.controller.threshold if self.controller else 0.0)

    def run_block(self, ctx: BlockContext):
        L = ctx.L
        b = TSPDBlock(Trajectories(L, self.cfg.window), TrendFilter(L, self.kparams), ctx.runner.adapter.mask_token_id,
                      innov_sign=np.zeros((L, 4), np.int8), stall=np.zeros(L, np.int64),
                      prev_lcb=np.full(L, -np.inf))
        self.block = b
        while ctx.masked.any():
            yield from self.step(ctx, b)

    def step(self, ctx: BlockContext, b: TSPDBlock):
        """One forward through the stages; its tensors go when it returns (``step_scoped``)."""
        _, st = yield from ctx.draft()
        s = TSPDStep(st, ctx.masked.numpy(), st.confidence.numpy().astype(np.float64), st.candidate.numpy())
        if self.cfg.stabilise:                     # the window is read only there: kept only then
            b.probs_hist = (b.probs_hist + [st.probs.float()])[-self.cfg.window:]        # (L, V) each, on the device
            s.window_top = tuple(x.numpy() for x in (yield from read(*window_top(b.probs_hist))))
        for stage in (self.observe, self.control, self.forecast, self.classify, self.stabilise, self.progress):
            stage(b, s)
        self.commit(ctx, s)
        yield ctx.emit("draft", st, self.fields(b, s))

    # ---- stages ----------------------------------------------------------------------------------------------
    def observe(self, b: TSPDBlock, s: TSPDStep) -> None:
        """Trajectories, the Kalman update on z = logit(c), innovation signs, the 14 features."""
        m = s.masked
        b.traj.push(m, s.conf, s.st.entropy.numpy(), s.st.margin.numpy(), s.cand)
        b.kf.step(logit(s.conf), m, b.traj.flipped)
        b.innov_sign[m] = np.roll(b.innov_sign[m], -1, 1)
        b.innov_sign[m, -1] = np.sign(b.kf.innov[m]).astype(np.int8)
        s.feats = b.traj.features(~m, self.cfg.block_size)

    def control(self, b: TSPDBlock, s: TSPDStep) -> None:
        """F1: positions the controller (MLP score ≥ τ_s, or the heuristic rule) calls final."""
        c = self.cfg
        if self.controller is not None:
            s.score = self.controller.score(s.feats)
            s.chosen[Reason.TSPD] = s.masked & (s.score >= self.tau_s)
        else:
            s.score = s.conf.copy()
            s.chosen[Reason.TSPD] = s.masked & heuristic_fix(s.feats, c.tau, c.alpha, c.s_min, c.window)

    def forecast(self, b: TSPDBlock, s: TSPDStep) -> None:
        """F2: the forecast's lower bound at the risk-aware horizon clears logit(τ) (look-ahead, CE)."""
        c, kf = self.cfg, b.kf
        s.level, s.vel = kf.s[:, 0].copy(), kf.s[:, 1].copy()
        u = np.minimum(1.0, np.sqrt(kf.P[:, 0, 0]) / c.sigma_ref)
        s.horizon = np.clip(np.rint(c.h_max * s.feats[:, F["left_progress"]] * (1 - u)), 0, c.h_max).astype(np.int64)
        mean_h, std_h = kf.forecast(s.horizon)
        s.lcb_h = mean_h - c.kappa * std_h
        s.chosen[Reason.CE_LOOKAHEAD] = (c.ce & s.masked & ~s.chosen[Reason.TSPD] & (s.horizon >= 1)
                                         & (s.lcb_h >= float(logit(c.tau))) & (s.vel >= 0)
                                         & (b.traj.stab >= c.s_min))

    def classify(self, b: TSPDBlock, s: TSPDStep) -> None:
        """Converging / oscillatory / stalled / stable-high (later labels win)."""
        m = s.masked
        flips = b.traj.flips_in_window()
        sign_changes = (b.innov_sign[:, 1:] * b.innov_sign[:, :-1] < 0).sum(1)
        s.osc = m & ((flips >= 2) | (sign_changes >= 3))
        b.stall = np.where(m & (s.level < 0) & (s.vel <= 0.05), b.stall + 1, 0)
        k = np.zeros(len(m), np.int8)
        k[m & (s.conf >= self.cfg.tau)] = TrajectoryClass.STABLE_HIGH
        k[m & (s.vel > 0) & (s.lcb_h > b.prev_lcb)] = TrajectoryClass.CONVERGING
        k[b.stall >= 3] = TrajectoryClass.STALLED
        k[s.osc] = TrajectoryClass.OSCILLATORY
        s.klass = k
        b.prev_lcb = np.where(m, s.lcb_h, b.prev_lcb)

    def stabilise(self, b: TSPDBlock, s: TSPDStep) -> None:
        """Veto oscillating tokens below τ_hard; F3 = oscillating tokens whose window-averaged distribution is
        confident, committed as that distribution's argmax."""
        c, f1, f2 = self.cfg, s.chosen[Reason.TSPD], s.chosen[Reason.CE_LOOKAHEAD]
        f3 = np.zeros(len(s.masked), bool)
        s.stab_tok = s.cand.copy()
        if c.stabilise:
            soft = s.osc & (s.conf < c.tau_hard)
            f1, f2 = f1 & ~soft, f2 & ~soft
            top, s.stab_tok = s.window_top
            f3 = (s.osc & ~f1 & ~f2 & (top >= c.tau_stab)
                  & (s.stab_tok != b.mask_id))
        s.chosen.update({Reason.TSPD: f1, Reason.CE_LOOKAHEAD: f2, Reason.STABILISED: f3})

    def progress(self, b: TSPDBlock, s: TSPDStep) -> None:
        """Nothing chosen: the best-scored masked position (ties: higher confidence, then leftmost)."""
        L = len(s.masked)
        forced = np.zeros(L, bool)
        if not any(v.any() for v in s.chosen.values()):
            order = np.lexsort((np.arange(L), -s.conf, -np.where(s.masked, s.score, -np.inf)))
            forced[order[0]] = True
        s.chosen[Reason.FORCED_PROGRESS] = forced

    def commit(self, ctx: BlockContext, s: TSPDStep) -> None:
        for why in (Reason.TSPD, Reason.CE_LOOKAHEAD, Reason.STABILISED, Reason.FORCED_PROGRESS):
            idx = np.flatnonzero(s.chosen[why])
            toks = s.stab_tok if why == Reason.STABILISED else s.cand
            ctx.commit(torch.from_numpy(idx), torch.from_numpy(toks[idx]), why)

    # ---- the record ------------------------------------------------------------------------------------------
    def fields(self, b: TSPDBlock, s: TSPDStep) -> TSPDDraftFields:
        c, kf, m, L = self.cfg, b.kf, s.masked, len(s.masked)
        fc = [kf.forecast(h) for h in range(1, c.h_max + 1)]
        f_mean = np.stack([mu for mu, _ in fc], 1) if fc else np.zeros((L, 0))
        f_std = np.stack([sd for _, sd in fc], 1) if fc else np.zeros((L, 0))

        def nan_un(a):  # NaN where the position is not masked
            return np.where(m[:, None] if a.ndim == 2 else m, a, np.nan).astype(np.float32)

        return TSPDDraftFields(
            features=nan_un(s.feats), score=nan_un(s.score), level=nan_un(s.level), velocity=nan_un(s.vel),
            cov=nan_un(kf.P.reshape(L, 4)[:, [0, 1, 3]]), forecast_mean=nan_un(f_mean), forecast_std=nan_un(f_std),
            forecast_lcb=nan_un(f_mean - c.kappa * f_std), horizon=np.where(m, s.horizon, -1), lcb_h=nan_un(s.lcb_h),
            klass=np.where(m, s.klass, -1).astype(np.int8), z=nan_un(logit(s.conf)), z_tau=float(logit(c.tau)),
            tau_s=self.tau_s, kappa=c.kappa)
