"""TSPD + CE: trajectory-aware parallel decoding with Confidence Extrapolation (Li et al., arXiv:2605.30753).

Only the paper's abstract could be read. Everything in this package marked PROPOSED is our reconstruction
(the features, the Kalman filter, the horizon rule and the controller), not the paper's method; each piece can be switched off.

Terms:
- **trajectory**: the per-step history of one masked position inside the active block (confidence, normalised
  entropy, margin, candidate), with a stability counter (steps with an unchanged candidate) and flip count.
- **level / velocity**: the Kalman state [λ, ν] tracking z = logit(confidence) under a local linear trend.
- **forecast**: the h-step-ahead mean λ + hν and variance σ_h² of the level.
- **horizon** h: how far ahead a position may be extrapolated; grows with left-context progress, shrinks with
  uncertainty (PROPOSED).
- **LCB**: the lower confidence bound ẑ − κσ_h of the forecast; look-ahead commits when it clears logit(τ).
- **class**: converging, oscillatory, stalled or stable-high (for display and stabilisation).
"""
