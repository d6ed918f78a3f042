"""S2D2's card (torch-free): what the decoder adds besides its rule (engine.catalogue.cards)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.catalogue.cards import Card, Example, ReasonEntry, SpeculativeSummary, VerifyFields, ViewEntry
from engine.catalogue.params import COMMON, Decoder, Param


ROUTERS = ("always", "never", "span", "score", "hysteresis", "ucb")
ESTIMATORS = ("entropy", "margin", "hard_entropy", "confidence", "linear_margin", "renyi2")
S2D2_PRESETS = {
    # the paper's SDAR configs (README of phymhan/S2D2)
    "sdar-a": dict(block_size=4, router="score", score_type="static", tau_score=0.0, cost=1.0, tau=0.85,
                   estimator="entropy", beta=1.0, draft_ver=True, cache_ver=True),
    "sdar-b": dict(block_size=16, router="score", score_type="static", tau_score=0.0, cost=0.0, tau=0.85,
                   estimator="entropy", beta=1.0, draft_ver=True, cache_ver=True),
    # two operating points from the write-up the project started from: quality (B 4, span) and speed (B 16)
    "quality": dict(block_size=4, router="span", tau_span=2, estimator="entropy", beta=0.7),
    "speed": dict(block_size=16, router="hysteresis", tau_on=1.0, tau_off=-2.0, estimator="entropy"),
}

@dataclass(frozen=True)
class S2D2DraftFields:
    router: dict                  # every router input and its decision (engine.decoders.s2d2.routers)
    verified: bool                # whether a verify forward follows
    attn_mask: np.ndarray         # (L, L) bool: the in-block drafting mask


@dataclass(frozen=True)
class S2D2VerifyFields(VerifyFields):
    """The common verify payload: attn_mask is the (2L, 2L) verifier mask, ratio min(1, (q/p)^γ)."""


@dataclass(frozen=True)
class S2D2Summary(SpeculativeSummary):
    verify_forwards: int = 0          # the router's paid verifications


CARD = Card(
    decoder=Decoder("s2d2",
        "**S2D2** self-speculation: the block-diffusion draft is checked by the same model in AR mode "
        "(one extra forward, the 2L mask) when the router judges it worth the cost c.",
        COMMON + ("preset", "tau", "steps", "router", "estimator", "beta", "tau_m", "rho", "cost", "score_type",
        "tau_span", "tau_score", "tau_on", "tau_off", "ucb_beta", "ucb_bins", "acceptance", "gamma",
        "draft_ver", "cache_ver"),
        presets=S2D2_PRESETS, rules=((lambda v: v["tau_on"] > v["tau_off"], "tau_on must be greater than tau_off"),),
        needs=("block_causal",), knob="tau", title="S2D2: router and verifier"),
    menu=('Speculative', 'S2D2: the same model verifies its draft'), rank=0,
    params={
        "preset": Param(str, "", choices=("", "sdar-a", "sdar-b", "quality", "speed"), label="Preset",
            help="a named setting; explicit parameters still win", group="s2d2"),
        "router": Param(str, "score", choices=ROUTERS, label="Router", help="when a verify forward is paid for",
            group="s2d2"),
        "estimator": Param(str, "entropy", choices=ESTIMATORS, label="Acceptance estimator α",
            help="cheap guess of a draft's acceptance chance", group="s2d2"),
        "beta": Param(float, 1.0, 0.0, 100.0, label="β (entropy sharpness)", help="α = exp(−β·H̃)", step=0.05,
            page=(0.0, 5.0), group="s2d2"),
        "tau_m": Param(float, 0.05, 0.0, 1.0, label="τ_m (margin estimator)", help="α = 1[p¹ − p² > τ_m]", step=0.01,
            group="s2d2"),
        "rho": Param(float, 0.8, 0.0, 10.0, open_lo=True, label="ρ (confidence estimator)", help="α = c^ρ", step=0.05,
            page=(0.05, 4.0), group="s2d2"),
        "cost": Param(float, 1.0, 0.0, 100.0, label="c (verification cost)",
            help="price of a verify forward, in tokens",
            step=0.1, page=(0.0, 8.0), group="s2d2"),
        "score_type": Param(str, "static", choices=("static", "dynamic"), label="Score K̂ − c or K̂ − c·N_hi",
            help="dynamic charges c per token the threshold would commit anyway", group="s2d2"),
        "tau_span": Param(int, 2, 1, 64, label="τ_span (minimum span)", help="span router: verify iff |span| ≥ τ_span",
            step=1, page=(1, 32), group="s2d2"),
        "tau_score": Param(float, 0.0, -100.0, 100.0, label="τ_score", help="score router: verify iff s ≥ τ_score",
            step=0.1, page=(-5.0, 5.0), group="s2d2"),
        "tau_on": Param(float, 1.0, -100.0, 100.0, label="τ_on (hysteresis)", help="switch verification on at s ≥ τ_on",
            step=0.1, page=(-5.0, 5.0), group="s2d2"),
        "tau_off": Param(float, -2.0, -100.0, 100.0, label="τ_off (hysteresis)", help="switch it off at s < τ_off",
            step=0.1, page=(-8.0, 4.0), group="s2d2"),
        "ucb_beta": Param(float, 1.0, 0.0, 100.0, label="UCB exploration β", help="bonus width of the bandit router",
            step=0.1, page=(0.0, 5.0), group="s2d2"),
        "ucb_bins": Param(int, 2, 1, 8, label="UCB context bins", help="buckets per context feature", step=1,
            group="s2d2"),
        "gamma": Param(float, 1.0, 0.0, 10.0, open_lo=True, label="γ (acceptance exponent)", help="min(1, (q/p)^γ)",
            step=0.05, page=(0.05, 4.0), group="s2d2"),
        "draft_ver": Param(bool, False, label="partial-causal drafting (draft_ver)", help="the paper's drafting mask",
            group="s2d2"),
        "cache_ver": Param(bool, False, label="AR-like caching (cache_ver)",
            help="committed K/V computed token-causally",
            group="s2d2"),
    },
    records={"draft": S2D2DraftFields, "verify": S2D2VerifyFields},
    summary_type=S2D2Summary,
    views=(ViewEntry("verifier", "Verifier map", "S2D2", "explorer.views.verifier:verifier_map",
                     "explorer.views.verifier", positions=True),
           ViewEntry("router", "Router timeline", "S2D2", "explorer.views.router:router_timeline",
                     "explorer.views.router"),
           ViewEntry("attn", "Attention mask of the step", "S2D2", "explorer.views.attention:attention_mask",
                     "explorer.views.attention", "server")),
    shows=(S2D2DraftFields, VerifyFields),   # SimSD's rounds carry their verification mask too
    reasons={
        "ACCEPT": ReasonEntry(5, "S2D2 accept", "#31a354", "acc"),   # draft token accepted by the verifier
        "RESAMPLE": ReasonEntry(6, "S2D2 resample", "#de2d26", "res"),
              # first rejected position, resampled from the residual
        "FALLBACK": ReasonEntry(7, "S2D2 fallback", "#08519c", "fb"),
              # committed by the base rule after (or instead of) verification
    },
    glossary=(
        ("draft", "S2D2: the ordinary block-diffusion forward, proposing a token at every masked position"),
        ("verify", "S2D2: one extra forward of the same model in block-size-1 (AR) mode through the 2L mask"),
        ("span", "the first contiguous run of masked positions; only it can be verified"),
        ("accept / reject / resample", "a draft x̂ is kept with probability min(1, (q/p)^γ) (γ = 1: exact speculative sampling); at the first rejection a token is drawn from max(q − p, 0) and the rest of the span waits"),
        ("estimator α", "a cheap guess of a draft's acceptance chance: exp(−β·H̃), margin, …"),
        ("K̂", "expected accepted tokens Σ_k Π_{i≤k} α_i"),
        ("router", "decides whether verifying is worth its cost: score s = K̂ − c (static) or K̂ − c·N_hi (dynamic), thresholds, hysteresis, or a UCB bandit"),
        ("N_hi", "masked positions the threshold rule would commit anyway this step"),
        ("2L", "the verifier's layout: the block's L positions twice, once as drafted tokens and once as masks, so one forward scores every draft autoregressively"),
    ),
    example=Example(dict(block_size=8, tau=0.9, steps=4, router="always", temperature=1.0), "story", shows="rejects"),
)
