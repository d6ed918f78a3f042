"""The parameter catalogue: every decoder, every parameter, every limit, written once (torch-free).

For each parameter: its name (the same in the engine, CLI, SPEC strings, URL and page), type, default, range,
label and one-line help. The decoders' config dataclasses, engine validation, CLI flags, SPEC parsing, URL parsing
and the page's controls are all derived from ``PARAMS`` and ``DECODERS``. A decoder in its own folder brings its
entries on its card (``engine.cards``); the others are written here. ``page`` narrows a range on the public page.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from engine.cards import cards
from engine.errors import ConfigError
from engine.params import COMMON, Decoder, Param  # noqa: F401  (re-exported: catalogue.COMMON, .Param, .Decoder)

DEFAULT_DECODER = "threshold"  # the decoder a page, a CLI call or a SPEC without a name gets
MAX_PROMPT_CHARS = 2000        # characters of prompt text, everywhere (page, URL, API, CLI)
SEED_MAX = 2**31 - 1

P = Param
ROUTERS = ("always", "never", "span", "score", "hysteresis", "ucb")
ESTIMATORS = ("entropy", "margin", "hard_entropy", "confidence", "linear_margin", "renyi2")
PARAMS: dict[str, Param] = {
    # every decoder
    "block_size": P(int, 8, 1, 64, label="Block size B", help="positions decoded in parallel per block", step=1,
                    page=(1, 32), group="main"),
    "gen_length": P(int, 64, 1, 1024, label="Generation length", help="masked slots after the prompt", step=8,
                    page=(8, 256), group="main"),
    "temperature": P(float, 0.0, 0.0, 5.0, label="Temperature (0 = greedy)", help="sampling temperature",
                     step=0.05, page=(0.0, 2.0), group="sampling"),
    "top_k": P(int, 0, 0, 1000, label="top-k (0 = off)", help="sample among the k most likely tokens", step=1,
               page=(0, 50), group="sampling"),
    "top_p": P(float, 1.0, 0.0, 1.0, open_lo=True, label="top-p", help="nucleus sampling mass", step=0.01,
               group="sampling"),
    "seed": P(int, 0, 0, SEED_MAX, label="Seed", help="fixes every random choice of a decode", group="sampling"),
    "use_cache": P(bool, True, label="exact block KV cache", help="off: recompute the prefix every forward",
                   group="engine", cli="cache"),
    "kv_cache": P(str, "none", choices=("none", "prefix", "dual"), label="KV cache of full-attention models",
                  help="none: the whole canvas every forward; Fast-dLLM's approximate caches, from each block's "
                  "first forward: prefix (later forwards run the block and the rest), dual (only the block); "
                  "block-causal models keep their exact cache", group="engine", cli="kv-cache"),
    "measure_drift": P(bool, False, label="measure the cache's drift",
                       help="one uncached forward beside each cached one: max |Δ logit| (not counted in NFE)",
                       group="engine"),
    "stop_at_eos": P(bool, True, label="stop at [EOS]", help="stop once a stop token is decoded", group="engine",
                     cli="eos-stop"),
    "fuse_commit": P(bool, True, label="fuse commit into the next forward",
                     help="off: SDAR's separate forward to store a finished block's K/V", group="engine"),
    # shared by several decoders
    "tau": P(float, 0.9, 0.0, 1.0, open_lo=True, label="τ (threshold)", help="confidence a token must reach",
             step=0.01, page=(0.05, 1.0), group="main"),
    "steps": P(int, 0, 0, 1024, label="Steps per block (0 = B)", help="denoising forwards per block (quota schedule)",
               step=1, page=(0, 64), group="main"),
    "remasking": P(str, "low_confidence", choices=("low_confidence", "random"), label="Remasking (LLaDA)",
                   help="which tokens a step keeps", group="llada"),
    "rule": P(str, "fastdllm", choices=("fastdllm", "sdar"), label="Threshold rule",
              help="fastdllm: all c ≥ τ (at least one); sdar: c > τ, else the step's quota", group="threshold"),
    # S2D2
    "preset": P(str, "", choices=("", "sdar-a", "sdar-b", "quality", "speed"), label="Preset",
                help="a named setting; explicit parameters still win", group="s2d2"),
    "router": P(str, "score", choices=ROUTERS, label="Router", help="when a verify forward is paid for",
                group="s2d2"),
    "estimator": P(str, "entropy", choices=ESTIMATORS, label="Acceptance estimator α",
                   help="cheap guess of a draft's acceptance chance", group="s2d2"),
    "beta": P(float, 1.0, 0.0, 100.0, label="β (entropy sharpness)", help="α = exp(−β·H̃)", step=0.05,
              page=(0.0, 5.0), group="s2d2"),
    "tau_m": P(float, 0.05, 0.0, 1.0, label="τ_m (margin estimator)", help="α = 1[p¹ − p² > τ_m]", step=0.01,
               group="s2d2"),
    "rho": P(float, 0.8, 0.0, 10.0, open_lo=True, label="ρ (confidence estimator)", help="α = c^ρ", step=0.05,
             page=(0.05, 4.0), group="s2d2"),
    "cost": P(float, 1.0, 0.0, 100.0, label="c (verification cost)", help="price of a verify forward, in tokens",
              step=0.1, page=(0.0, 8.0), group="s2d2"),
    "score_type": P(str, "static", choices=("static", "dynamic"), label="Score K̂ − c or K̂ − c·N_hi",
                    help="dynamic charges c per token the threshold would commit anyway", group="s2d2"),
    "tau_span": P(int, 2, 1, 64, label="τ_span (minimum span)", help="span router: verify iff |span| ≥ τ_span",
                  step=1, page=(1, 32), group="s2d2"),
    "tau_score": P(float, 0.0, -100.0, 100.0, label="τ_score", help="score router: verify iff s ≥ τ_score",
                   step=0.1, page=(-5.0, 5.0), group="s2d2"),
    "tau_on": P(float, 1.0, -100.0, 100.0, label="τ_on (hysteresis)", help="switch verification on at s ≥ τ_on",
                step=0.1, page=(-5.0, 5.0), group="s2d2"),
    "tau_off": P(float, -2.0, -100.0, 100.0, label="τ_off (hysteresis)", help="switch it off at s < τ_off",
                 step=0.1, page=(-8.0, 4.0), group="s2d2"),
    "ucb_beta": P(float, 1.0, 0.0, 100.0, label="UCB exploration β", help="bonus width of the bandit router",
                  step=0.1, page=(0.0, 5.0), group="s2d2"),
    "ucb_bins": P(int, 2, 1, 8, label="UCB context bins", help="buckets per context feature", step=1, group="s2d2"),
    "acceptance": P(str, "stochastic", choices=("stochastic", "greedy"), label="Acceptance",
                    help="stochastic: min(1, (q/p)^γ) + residual; greedy: argmax match", group="s2d2"),
    "gamma": P(float, 1.0, 0.0, 10.0, open_lo=True, label="γ (acceptance exponent)", help="min(1, (q/p)^γ)",
               step=0.05, page=(0.05, 4.0), group="s2d2"),
    "draft_ver": P(bool, False, label="partial-causal drafting (draft_ver)", help="the paper's drafting mask",
                   group="s2d2"),
    "cache_ver": P(bool, False, label="AR-like caching (cache_ver)", help="committed K/V computed token-causally",
                   group="s2d2"),
    # SimSD
    "drafter": P(str, "", label="Drafter", help="the small drafting model; empty = the target's paired drafter "
                 "(on the page only embedded models)", group="simsd", model=True),
    "mask": P(str, "released", choices=("released", "simplified"), label="Verification mask",
              help="released: the temporal mask of the SimSD code; simplified: the seed article's description",
              group="simsd"),
    "draft_steps": P(int, 0, 0, 64, label="Drafter steps S (0 = B)", help="drafter forwards per round", step=1,
                     page=(0, 32), group="simsd"),
    "reveal": P(str, "static", choices=("static", "dynamic"), label="Drafter reveal rule",
                help="static: top-k per step; dynamic: every c > τ if at least k", group="simsd"),
    # revising decoders
    "tau_edit": P(float, 0.7, 0.0, 1.0, label="τ_edit (token-to-token)", help="rewrite a written token when the "
                  "model prefers another with p > τ_edit", step=0.01, group="edit"),
    "post_steps": P(int, 0, 0, 16, label="post-block edit steps", help="edit-only forwards once a block is full",
                    step=1, page=(0, 8), group="edit"),
    "check_next": P(bool, True, label="edit the previous block in the next one's first forward",
                    help="T2T on a finished block at no extra forward (ours); off: the reference's post steps only",
                    group="edit"),
    "tau_wide": P(float, 0.6, 0.0, 1.0, open_lo=True, label="τ_wide (draft)", help="draft every slot with p ≥ "
                  "τ_wide", step=0.01, page=(0.05, 1.0), group="wino"),
    "tau_narrow": P(float, 0.9, 0.0, 1.0, label="τ_narrow (keep)", help="re-mask a drafted token whose p falls "
                    "below τ_narrow", step=0.01, group="wino"),
    "eta": P(float, 0.1, 0.0, 0.5, label="η (remasking cap)", help="remdm-cap: each written token goes back to "
             "[MASK] with σ = min(η, (1 − α_s)/α_t)", step=0.01, group="remdm"),
    "remask": P(str, "cap", choices=("cap", "conf"), label="ReMDM schedule", help="cap: σ = min(η, (1 − α_s)/α_t) "
                "per written token; conf: σ_max · softmax(−p at unmasking) over the block's written tokens",
                group="remdm"),
    "entropy_bound": P(float, 0.1, 0.0, 100.0, open_lo=True, label="γ (entropy bound)", help="commit the lowest-"
                       "entropy slots while Σ H − max H ≤ γ (nats)", step=0.01, page=(0.01, 5.0), group="eb"),
    "alg": P(str, "entropy", choices=("origin", "maskgit_plus", "topk_margin", "entropy"), label="Dream's score",
             help="which masked slots a step reveals: origin at random (1 − s/t each), else the best by p, the top-2 "
             "margin or minus the entropy", group="dream"),
    "alg_temp": P(float, 0.0, 0.0, 100.0, label="alg_temp (0 = the top ones)",
                  help="> 0: draw the slots to reveal from softmax(score / alg_temp)", step=0.05, page=(0.0, 5.0),
                  group="dream"),
    "eps": P(float, 1e-3, 0.0, 1.0, open_lo=True, open_hi=True, label="eps (last timestep)",
             help="timesteps linspace(1, eps, steps + 1)", step=0.001, group="dream"),
    "sub_block": P(int, 8, 1, 64, label="sub-block size", help="Fast-dLLM v2: the block is decoded sub-block by "
                   "sub-block, left to right, the threshold rule inside the current one", step=1, page=(1, 32),
                   group="subblock"),
    "block_cache": P(bool, False, label="block cache (second level)", help="Fast-dLLM v2: a sub-block whose first "
                     "slot is decided runs alone against the block's stale K/V", group="subblock"),
    # the uniform-noise canvas (DiffusionGemma): 0 / -1 = the checkpoint's generation_config.json
    "max_denoising_steps": P(int, 0, 0, 1024, label="denoising steps per canvas (0 = the model's)",
                             help="most decoder forwards per canvas (DiffusionGemma's default 48)", step=1,
                             page=(0, 128), group="uniform"),
    "t_min": P(float, 0.0, 0.0, 5.0, label="t_min, last step's temperature (0 = the model's)",
               help="the schedule falls linearly from t_max to t_min", step=0.05, page=(0.0, 2.0), group="uniform"),
    "t_max": P(float, 0.0, 0.0, 5.0, label="t_max, first step's temperature (0 = the model's)",
               help="the schedule falls linearly from t_max to t_min", step=0.05, page=(0.0, 2.0), group="uniform"),
    "stability_threshold": P(int, -1, -1, 64, label="stability steps (−1 = the model's)",
                             help="steps the argmax canvas must stay unchanged before a canvas may stop", step=1,
                             page=(-1, 16), group="uniform"),
    "confidence_threshold": P(float, 0.0, 0.0, 100.0, label="confidence threshold (0 = the model's)",
                              help="a canvas may stop once its mean entropy (nats, tempered) is below it",
                              step=0.001, page=(0.0, 1.0), group="uniform"),
    # TSPD + CE (PROPOSED)
    "controller": P(str, "mlp", choices=("mlp", "heuristic"), label="Controller",
                    help="learned MLP or the training-free rule", group="tspd"),
    "tau_s": P(float, 0.0, 0.0, 1.0, open_hi=True, label="controller threshold τ_s (0 = the card's)",
               help="MLP score a token needs; 0 = the operating point chosen on val", step=0.001, group="tspd"),
    "ce": P(bool, True, label="Confidence extrapolation (look-ahead)", help="commit when the forecast LCB clears τ",
            group="tspd"),
    "kappa": P(float, 1.64, 0.0, 10.0, label="κ (LCB width, in σ)", help="forecast lower bound ẑ − κσ", step=0.01,
               page=(0.0, 4.0), group="tspd"),
    "h_max": P(int, 4, 0, 32, label="h_max (longest horizon)", help="forwards the forecast may look ahead",
               step=1, page=(0, 8), group="tspd"),
    "window": P(int, 4, 2, 16, label="trajectory window k", help="forwards of history per position", step=1,
                group="tspd"),
    "sigma_ref": P(float, 1.0, 0.0, 100.0, open_lo=True, label="σ_ref (horizon uncertainty scale)",
                   help="horizon shrinks as the level's σ approaches σ_ref", step=0.05, page=(0.05, 5.0),
                   group="tspd"),
    "s_min": P(int, 2, 0, 16, label="s_min (stable steps)", help="steps a candidate must hold before look-ahead",
               step=1, group="tspd"),
    "stabilise": P(bool, True, label="stabilise oscillating tokens", help="veto flip-flopping tokens",
                   group="tspd"),
    "tau_hard": P(float, 0.99, 0.0, 1.0, open_lo=True, label="τ_hard (oscillation veto bar)",
                  help="oscillating tokens below it are held back", step=0.01, group="tspd"),
    "tau_stab": P(float, 0.9, 0.0, 1.0, open_lo=True, label="τ_stab (stabilised commit)",
                  help="window-averaged confidence that fixes an oscillating token", step=0.01, group="tspd"),
    "alpha": P(float, 0.1, 0.0, 1.0, label="α (heuristic relaxation)", help="bar relaxed by α · left progress",
               step=0.01, group="tspd"),
    "q_level": P(float, 0.0, 0.0, 100.0, label="Kalman q_level (0 = fitted)", help="level process noise",
                 step=0.01, page=(0.0, 5.0), group="tspd"),
    "q_vel": P(float, 0.0, 0.0, 100.0, label="Kalman q_vel (0 = fitted)", help="velocity process noise",
               step=0.01, page=(0.0, 5.0), group="tspd"),
    "r": P(float, 0.0, 0.0, 100.0, label="Kalman R (0 = fitted)", help="observation noise", step=0.01,
           page=(0.0, 5.0), group="tspd"),
}
for _k, _p in PARAMS.items():
    object.__setattr__(_p, "name", _k)


S2D2_PRESETS = {
    # the paper's SDAR configs (README of phymhan/S2D2)
    "sdar-a": dict(block_size=4, router="score", score_type="static", tau_score=0.0, cost=1.0, tau=0.85,
                   estimator="entropy", beta=1.0, draft_ver=True, cache_ver=True),
    "sdar-b": dict(block_size=16, router="score", score_type="static", tau_score=0.0, cost=0.0, tau=0.85,
                   estimator="entropy", beta=1.0, draft_ver=True, cache_ver=True),
    # the seed article's operating points
    "quality": dict(block_size=4, router="span", tau_span=2, estimator="entropy", beta=0.7),
    "speed": dict(block_size=16, router="hysteresis", tau_on=1.0, tau_off=-2.0, estimator="entropy"),
}
DECODERS: dict[str, Decoder] = {d.name: d for d in (
    Decoder("threshold", "**Threshold** (Fast-dLLM): commit every masked token with confidence ≥ τ, at least one "
            "per step.", COMMON + ("tau", "rule", "steps"), knob="tau", title="Threshold rule"),
    Decoder("llada", "**LLaDA** fixed steps: each block gets `steps` forwards; the most confident tokens are kept.",
            COMMON + ("steps", "remasking"), title="LLaDA"),
    Decoder("ar", "**Autoregressive**: the same model with block size 1, one token per forward.", COMMON,
            overrides={"block_size": dict(default=1, lo=1, hi=1, page=(1, 1))}),
    Decoder("s2d2", "**S2D2** self-speculation: the block-diffusion draft is checked by the same model in AR mode "
            "(one extra forward, the 2L mask) when the router judges it worth the cost c.",
            COMMON + ("preset", "tau", "steps", "router", "estimator", "beta", "tau_m", "rho", "cost", "score_type",
                      "tau_span", "tau_score", "tau_on", "tau_off", "ucb_beta", "ucb_bins", "acceptance", "gamma",
                      "draft_ver", "cache_ver"),
            presets=S2D2_PRESETS, rules=((lambda v: v["tau_on"] > v["tau_off"], "tau_on must be greater than tau_off"),),
            needs=("block_causal",), knob="tau", title="S2D2: router and verifier"),
    Decoder("simsd", "**SimSD** two-model speculation: a small drafter denoises the block, recording when it revealed "
            "each slot; the target checks every draft in one forward through a temporal attention mask.",
            COMMON + ("drafter", "acceptance", "mask", "draft_steps", "reveal", "tau"),
            overrides={"acceptance": dict(choices=("greedy", "mrs"), default="greedy",
                                          help="greedy: argmax match; mrs: min(1, q/p) + residual, a bonus token (biased with a greedy "
                                               "drafter, temperature 0: the trace says so)")},
            needs=("block_causal", "no_shift"), knob="tau", title="SimSD: drafter and verification",
            resources=("drafter",)),
    Decoder("tspd", "**TSPD + CE** — *our reconstruction (PROPOSED): inputs and feature families from the paper, formulas ours.* "
            "A small controller reads each token's trajectory; a Kalman filter forecasts its confidence and commits "
            "early when the forecast's lower bound clears τ; oscillating tokens are held back.",
            COMMON + ("tau", "controller", "tau_s", "ce", "kappa", "h_max", "window", "sigma_ref", "s_min",
                      "stabilise", "tau_hard", "tau_stab", "alpha", "q_level", "q_vel", "r"),
            overrides={"block_size": dict(default=16), "tau": dict(default=0.99, open_hi=True)}, proposed=True,
            knob="tau", title="TSPD + CE (PROPOSED reconstruction)"),
    Decoder("edit", "**Token editing** (LLaDA2.1's joint threshold): fill masks whose p > τ and, in the same forward, "
            "rewrite a written token of the block when the model prefers another with p > τ_edit; a finished block "
            "is checked again in the next block's first forward (ours), and edit-only forwards per block are "
            "optional.", COMMON + ("tau", "tau_edit", "post_steps", "check_next"),
            knob="tau", title="Token editing (joint threshold)", revises=True),
    Decoder("wino", "**WINO** wide-in, narrow-out: draft every slot with p ≥ τ_wide, re-mask drafted tokens the "
            "next forward supports with p < τ_narrow.", COMMON + ("tau_wide", "tau_narrow"),
            knob="tau_wide", title="WINO: wide-in, narrow-out", revises=True),
    Decoder("remdm", "**ReMDM** remasking (the released remdm-cap / remdm-conf samplers): fixed steps over "
            "timesteps t = 1 … 1/S; each step draws, per written token of the block, whether it goes back to [MASK] "
            "(σ capped by η, or weighted by how unsure it was when unmasked); a re-masked slot waits for a later "
            "step.", COMMON + ("steps", "eta", "remask"), knob="eta", title="ReMDM: remasking",
            revises=True),
    Decoder("eb", "**EB** entropy-bounded: commit the lowest-entropy masked slots while Σ H − max H ≤ γ, a bound on "
            "their mutual dependence.", COMMON + ("entropy_bound",), knob="entropy_bound", title="EB: entropy bound"),
    Decoder("dream", "**Dream's sampler** (`diffusion_generate`): the whole answer as one block and `steps` "
            "forwards over timesteps from 1 to eps; each step reveals int(n_masked · (1 − s/t)) masked slots, the "
            "best by `alg`'s score (or drawn with alg_temp), or each slot with chance 1 − s/t (`origin`).",
            tuple(k for k in COMMON if k != "block_size") + ("steps", "alg", "alg_temp", "eps"),
            overrides={"steps": dict(label="Steps (0 = one per token)", help="forwards over the whole answer")},
            needs=("full",), title="Dream's sampler"),
    Decoder("subblock", "**Sub-block** (Fast-dLLM v2): the block is decoded sub-block by sub-block, left to right; "
            "in the current one every masked slot with p > τ is committed, and the most confident always. On a "
            "right-shifted model a block's first slot is predicted by the finished block's last row, alone.",
            COMMON + ("tau", "sub_block", "block_cache"),
            overrides={"top_p": dict(default=0.95, help="nucleus of the tempered distribution (Fast-dLLM v2: 0.95)")},
            rules=((lambda v: v["block_size"] % v["sub_block"] == 0,
                                                   "block_size must be a multiple of sub_block"),),
            needs=("block_causal",), knob="tau", title="Sub-block (Fast-dLLM v2)"),
    Decoder("uniform", "**Uniform-noise canvas** (DiffusionGemma): a canvas of random tokens; each step samples "
            "every slot under a temperature falling from t_max to t_min, keeps the lowest-entropy samples within "
            "the entropy bound γ, replaces the rest with fresh random tokens and feeds its logits to the next step "
            "(self-conditioning). A canvas stops when its argmax is stable and its mean entropy low.",
            ("gen_length", "seed", "stop_at_eos", "max_denoising_steps", "entropy_bound", "t_min", "t_max",
             "stability_threshold", "confidence_threshold"),
            overrides={"entropy_bound": dict(default=0.0, open_lo=False, page=(0.0, 5.0),
                                             label="γ (entropy bound; 0 = the model's)")},
            rules=((lambda v: not (v["t_min"] and v["t_max"]) or v["t_max"] > v["t_min"],
                    "t_max must be greater than t_min"),),
            needs=("canvas",), title="Uniform canvas (DiffusionGemma)"),
)}


# the decoder menu in plain words, grouped (the page's dropdown lists them in this order)
MENU: dict[str, tuple[str, str]] = {
    "threshold": ("Baseline", "confidence threshold τ (Fast-dLLM)"),
    "llada": ("Baseline", "fixed steps per block (LLaDA)"),
    "ar": ("Baseline", "autoregressive, one token per forward"),
    "eb": ("Baseline", "entropy bound γ (EB sampler)"),
    "s2d2": ("Speculative", "S2D2: the same model verifies its draft"),
    "simsd": ("Speculative", "SimSD: a small drafter, the target verifies"),
    "tspd": ("Trajectory", "TSPD + CE: forecast each token's confidence (PROPOSED)"),
    "edit": ("Changes its mind", "token editing: rewrite written tokens"),
    "wino": ("Changes its mind", "WINO: wide in, narrow out"),
    "remdm": ("Changes its mind", "ReMDM: send tokens back to [MASK]"),
    "dream": ("Family's own sampler", "Dream's diffusion_generate"),
    "subblock": ("Family's own sampler", "Fast-dLLM v2's sub-blocks"),
    "uniform": ("Family's own sampler", "DiffusionGemma's uniform-noise canvas"),
}


def _grouped(menu: dict, name: str, entry: tuple[str, str]) -> dict:
    """The menu with ``name`` placed after the last decoder of its group (the dropdown keeps groups together)."""
    keys = list(menu)
    at = max((i + 1 for i, k in enumerate(keys) if menu[k][0] == entry[0]), default=len(keys))
    keys.insert(at, name)
    return {k: entry if k == name else menu[k] for k in keys}


def _index_cards() -> None:
    """A decoder in its own folder brings its entry, parameters and menu words on its card (engine.cards)."""
    for name, card in cards().items():
        assert name not in DECODERS and not set(card.params) & set(PARAMS), f"{name}: a name is taken"
        for k, p in card.params.items():
            object.__setattr__(p, "name", k)
        PARAMS.update(card.params)
        DECODERS[name] = card.decoder
        grouped = _grouped(MENU, name, card.menu)
        MENU.clear()
        MENU.update(grouped)


_index_cards()


# the decoders whose commit rule is "every masked slot with confidence ≥ τ" (the page previews a τ drag on them)
THRESHOLD_RULE = ("threshold", "subblock", "edit")


def menu_label(name: str) -> str:
    group, words = MENU[name]
    return f"{group} · {words}"


def embedded_names() -> list[str]:
    """The models shipped under assets/models (the only drafters a visitor may name)."""
    root = Path(__file__).resolve().parent.parent / "assets" / "models"
    return sorted(p.parent.name for p in root.glob("*/config.json"))


def decoder(name: str) -> Decoder:
    if not isinstance(name, str) or name not in DECODERS:
        raise ConfigError(f"unknown decoder {str(name)[:40]!r}; known: {', '.join(sorted(DECODERS))}")
    return DECODERS[name]


def params_of(name: str) -> dict[str, Param]:
    """The decoder's parameters, with its overrides applied, in catalogue order."""
    d = decoder(name)
    return {k: dataclasses.replace(PARAMS[k], **d.overrides.get(k, {})) for k in d.params}


def shared_param(key: str) -> Param:
    """A parameter as the page and the URL see it (one control for every decoder): its choices are the union of
    every decoder's (S2D2 accepts stochastic|greedy, SimSD greedy|mrs)."""
    p = PARAMS[key]
    extra = [c for d in DECODERS.values() for c in d.overrides.get(key, {}).get("choices", ())]
    return dataclasses.replace(p, choices=tuple(dict.fromkeys(p.choices + tuple(extra)))) if p.choices else p


def validate(name: str, values: dict, page: bool = False) -> dict:
    """Raw values (text or Python) -> typed, range-checked values; unknown keys and bad values raise ConfigError.
    A preset supplies defaults that explicit values override."""
    spec = params_of(name)
    unknown = sorted(set(values) - set(spec))
    if unknown:
        raise ConfigError(f"unknown parameter(s) for {name}: {', '.join(str(u)[:40] for u in unknown)}; "
                          f"known: {', '.join(spec)}")
    typed = {k: spec[k].coerce(v) for k, v in values.items() if v is not None}
    for k, v in typed.items():
        if page and spec[k].model and v and v not in embedded_names():
            raise ConfigError(f"{k}: on this page only the embedded models can be named")
    preset = typed.get("preset")
    if preset:
        spec["preset"].check(preset)
        typed = {**decoder(name).presets[preset], **typed}
    full = {k: typed.get(k, p.default) for k, p in spec.items()}
    for k, v in full.items():
        spec[k].check(v, page=page and k in typed)
    for ok, msg in decoder(name).rules:
        if not ok(full):
            raise ConfigError(msg)
    return typed


class ConfigBase:
    """What every generated config dataclass has: ``params()``. Values are validated once, by ``validate`` in
    ``engine.decoders.build_decoder``, before a config is made."""
    decoder_name = ""

    def __getattr__(self, key):
        """A common parameter this decoder does not take reads its catalogue default (the uniform decoder has no
        temperature and no block cache); any other missing name is a bug."""
        if key in COMMON:
            return PARAMS[key].default
        raise AttributeError(key)

    def params(self) -> dict:
        return dataclasses.asdict(self)


def config_class(name: str) -> type:
    """The decoder's config dataclass, made from its catalogue entries (``cfg.tau``, ``cfg.block_size``, ...)."""
    fields = [(k, p.type, dataclasses.field(default=p.default)) for k, p in params_of(name).items()]
    cls = dataclasses.make_dataclass(f"{name.capitalize()}Config", fields, bases=(ConfigBase,))
    cls.decoder_name = name
    # its fields, declared where a reader looks (help(cfg), an IDE's hover): name, type, default, range, meaning
    cls.__doc__ = f"{name}'s parameters, made from engine.catalogue:\n" + "\n".join(
        f"    {k}: {p.type.__name__} = {p.default!r}  {p.interval() if p.lo is not None and p.type is not bool else ''}"
        f"  {p.label} — {p.help}" for k, p in params_of(name).items())
    return cls
