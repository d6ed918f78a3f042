"""The trajectory-aware rivals of TSPD + CE: Prophet's answer gap, KLASS's stability, credit decoding's evidence.

How to read: **Prophet**: per forward, the mean top-1 − top-2 logit gap of the block's masked slots (line) against
the bar of the decode's phase (steps: 7.5, 5.0, 2.5 by default, falling as the decode progresses); a diamond marks
each forward that committed its block's rest at once (the title counts them). **KLASS**: each masked slot's KL
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
    exits = [s for s, f in rows if f.exited]        # every forward that committed its block's rest at once
    data = [dict(type="scatter", x=x, y=gap, mode="lines+markers", name="mean logit gap of the masked slots",
                 line=dict(color="#555"), hovertemplate="step %{x}<br>gap %{y:.2f}<extra></extra>"),
            dict(type="scatter", x=x, y=bar, mode="lines", name="bar of the phase", line=dict(color="#e7298a",
                 shape="hv", dash="dash"), hovertemplate="step %{x}<br>bar %{y:.2f}<extra></extra>")]
    if exits:
        data.append(dict(type="scatter", x=exits, y=[gap[x.index(e)] for e in exits], mode="markers",
                         name=f"early commit ({len(exits)})", marker=dict(symbol="diamond", size=12, color="#e7298a"),
                         hovertemplate="step %{x}: the block's rest committed at once<extra></extra>"))
    title = early_title(exits, len(trace.records)) if exits else "Prophet: the gap never cleared its bar"
    # the legend goes below the step axis: above the plot it runs into the title on a phone
    return figure(data, dict(shapes=cursor(step, axis="x"), height=360, title=dict(text=title, x=0.01),
                             margin=dict(l=60, r=10, t=40, b=110), xaxis=dict(title=dict(text="step")),
                             yaxis=dict(title=dict(text="top-1 − top-2 logit")),
                             legend=dict(orientation="h", x=0, y=-0.28, yanchor="top")))


def early_title(exits: list[int], n: int) -> str:
    """How many forwards committed early, and at which steps (the first few)."""
    if len(exits) == n:
        return f"Prophet: {n} early commits, one at every forward (each block committed at once)"
    many = len(exits) > 1
    steps = ", ".join(map(str, exits[:6])) + (", …" if len(exits) > 6 else "")
    return f"Prophet: {len(exits)} early commit{'s' * many}, at step{'s' * many} {steps}"


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
