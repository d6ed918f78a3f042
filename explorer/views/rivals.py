"""The trajectory-aware rivals of TSPD + CE: Prophet's answer gap, KLASS's stability, credit decoding's evidence.

How to read: **Prophet**: per forward, the mean top-1 − top-2 logit gap of the block's masked slots (line) against
the bar of the decode's phase (steps: 7.5, 5.0, 2.5 by default, falling as the decode progresses); a diamond marks
the forward whose gap cleared its bar (the exit), a square each later forward, which commits a whole block at once
whatever its gap (the title counts them). **KLASS**: each masked slot's KL
between this forward's distribution and the previous one's, on a log scale (bright = the distribution stopped
moving); a ring marks a slot whose last H KLs were all below ε (stable), × a commit; a block's first forward has no
previous distribution and no colour. **Credit**: what the accumulated credit added to each masked slot's candidate
logit, α · log(1 + C) (bright = the same token was top-1 in many recent forwards); × = committed.
"""

from __future__ import annotations

import math

import numpy as np
from plotly.colors import get_colorscale

from engine.decoders.credit.card import CreditFields
from engine.decoders.klass.card import KlassFields
from engine.decoders.prophet.card import ProphetFields
from engine.records.trace import own_records
from explorer.grid import Grid
from explorer.views.heatmaps import (NO_VALUE, colour_bar, committed_marks, cursor, empty_figure, figure,
                                      percent_scale, quantize, step_position_figure)

KL_DECADES = (-4.0, 1.0)   # log10 KL shown from 1e-4 (bright) to 10 nats (dark)
REVERSED_VIRIDIS = [[1 - x, c] for x, c in reversed(get_colorscale("Viridis"))]   # bright = small KL


def prophet_gap(trace, step: int | None = None, grid: Grid | None = None, selected: int | None = None):
    rows = [(s + 1, f) for s, _, f in own_records(trace, ProphetFields) if f.prophet_gap is not None]
    if not rows:
        return empty_figure("Prophet records its answer gap on every forward: run the prophet decoder.")
    x = [s for s, _ in rows]
    gap = [f.prophet_gap for _, f in rows]
    bar = [f.prophet_bar for _, f in rows]
    data = [dict(type="scatter", x=x, y=gap, mode="lines+markers", name="mean logit gap of the masked slots",
                 line=dict(color="#555"), hovertemplate="step %{x}<br>gap %{y:.2f}<extra></extra>"),
            dict(type="scatter", x=x, y=bar, mode="lines", name="bar of the phase", line=dict(color="#e7298a",
                 shape="hv", dash="dash"), hovertemplate="step %{x}<br>bar %{y:.2f}<extra></extra>")]
    # the rule's exit: the one forward whose gap cleared its bar; every forward after it commits a block whole,
    # whatever its gap (``exited`` stays true): drawn apart, so no mark stands under the bar it did not clear
    done = [s for s, f in rows if f.exited]
    exit_at, whole = done[:1], done[1:]
    if exit_at:
        data.append(dict(type="scatter", x=exit_at, y=[gap[x.index(e)] for e in exit_at], mode="markers",
                         name="exit: the gap cleared its bar", marker=dict(symbol="diamond", size=13, color="#e7298a"),
                         hovertemplate="step %{x}: the gap cleared its bar; the block's rest committed at once"
                                       "<extra></extra>"))
    if whole:
        data.append(dict(type="scatter", x=whole, y=[gap[x.index(e)] for e in whole], mode="markers",
                         name=f"a block committed whole, after the exit ({len(whole)})",
                         marker=dict(symbol="square", size=9, color="#7570b3"),
                         hovertemplate="step %{x}: after the exit, the whole block committed in this forward"
                                       "<extra></extra>"))
    title = early_title(exit_at[0], len(whole)) if exit_at else "Prophet: the gap never cleared its bar"
    # the legend goes below the step axis: above the plot it runs into the title on a phone
    return figure(data, dict(shapes=cursor(step, axis="x"), height=360, title=dict(text=title, x=0.01),
                             margin=dict(l=60, r=10, t=40, b=110), xaxis=dict(title=dict(text="step")),
                             yaxis=dict(title=dict(text="top-1 − top-2 logit")),
                             legend=dict(orientation="h", x=0, y=-0.28, yanchor="top")))


def early_title(exit_step: int, whole: int) -> str:
    """Where the rule exited, and how many blocks it then committed whole (a forward each)."""
    after = f"; then {whole} block{'s' * (whole != 1)} committed whole, a forward each" if whole else ""
    return f"Prophet: the gap cleared its bar at step {exit_step}{after}"


def klass_map(trace, step: int | None = None, grid: Grid | None = None, selected: int | None = None):
    g = grid or Grid.of(trace)
    own = [f for _, _, f in own_records(trace, KlassFields) if f.kl is not None]
    if not own:
        return empty_figure("KLASS records each slot's KL on every forward: run the klass decoder.")
    lo, hi = KL_DECADES
    kl = g.extra(KlassFields, lambda f: f.kl)
    z = quantize(1 - (np.clip(np.log10(np.maximum(kl, 1e-30)), lo, hi) - lo) / (hi - lo))
    eps = own[0].kl_eps
    data = [dict(type="heatmap", z=z, x=g.labels, y=np.arange(1, g.n_steps + 1), zmin=0, zmax=NO_VALUE,
                 colorscale=percent_scale(), showscale=False, customdata=kl,
                 hovertemplate="pos %{x} · step %{y}<br>KL %{customdata:.2e} nats<extra></extra>")]
    stable = np.argwhere(g.extra(KlassFields, lambda f: f.kl_stable, False, bool))
    data.append(dict(type="scatter", x=g.labels[stable[:, 1]], y=stable[:, 0] + 1, mode="markers", name="stable",
                     marker=dict(symbol="circle-open", size=9, color="#e7298a"), hoverinfo="skip"))
    data += committed_marks(g) + [colour_bar("log₁₀ KL", REVERSED_VIRIDIS, lo, hi)]
    title = f"KLASS: KL(p_t ‖ p_t−1) per masked slot (○ stable: below ε = {eps:g} for H forwards; × committed)"
    return step_position_figure(data, g, step, title, selected, margin=dict(r=80), showlegend=False)


def credit_map(trace, step: int | None = None, grid: Grid | None = None, selected: int | None = None):
    g = grid or Grid.of(trace)
    if not any(f.credit is not None for _, _, f in own_records(trace, CreditFields)):
        return empty_figure("Credit decoding records each slot's credit on every forward: run the credit decoder.")
    params = trace.meta.params
    top = params["credit_alpha"] * math.log1p(1 / max(1e-9, 1 - params["credit_beta"]))   # the most C can add
    boost = g.extra(CreditFields, lambda f: f.credit_boost)
    data = [dict(type="heatmap", z=quantize(boost / max(top, 1e-9)), x=g.labels, y=np.arange(1, g.n_steps + 1),
                 zmin=0, zmax=NO_VALUE, colorscale=percent_scale(), showscale=False, customdata=boost,
                 hovertemplate="pos %{x} · step %{y}<br>logit + %{customdata:.3f}<extra></extra>"),
            *committed_marks(g), colour_bar("α·log(1 + C)", "Viridis", 0, round(top, 2))]
    return step_position_figure(data, g, step, "credit: what the accumulated evidence added to each candidate's "
                                "logit (× committed)", selected, margin=dict(r=80))
