"""CE heatmaps over step x position: forecast lower bound at the horizon, the horizon, the trajectory class.

How to read: the first panel is the LCB, the forecast's lower confidence bound ẑ − κσ_h (the Kalman filter's
forecast logit minus κ standard deviations, at each position's own horizon h), shown as a probability; cells at
or above τ are where look-ahead may commit. The horizon grows with decoded left context and shrinks with the
filter's uncertainty. Classes: converging, oscillatory (vetoed from early commits), stalled, stable-high.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from engine.decoders.tspd.card import TSPDDraftFields
from engine.records.trace import TrajectoryClass
from explorer.grid import Grid
from explorer.views.heatmaps import (MISSING_CODE, NO_VALUE, categorical_missing_scale, colour_bar, cursor,
                                      percent_scale, quantize, rows_height)

CLASS_NAMES = [c.name.lower().replace("_", "-") for c in TrajectoryClass]
CLASS_COLOURS = ["#f0f0f0", "#31a354", "#de2d26", "#969696", "#3182bd"]


def ce_maps(trace, step: int | None = None, grid: Grid | None = None, selected: int | None = None) -> go.Figure:
    g = grid or Grid.of(trace)
    lcb = quantize(1 / (1 + np.exp(-g.extra(TSPDDraftFields, lambda f: f.lcb_h))))
    # "not masked" is MISSING_CODE, not -1: a 0xFF byte is "/" in base64, which to_json escapes to 6 bytes
    horizon = g.extra(TSPDDraftFields, lambda f: f.horizon, -1, np.int16)
    klass = g.extra(TSPDDraftFields, lambda f: f.klass, -1, np.int16)
    horizon = np.where(horizon < 0, MISSING_CODE, horizon).astype(np.uint8)
    klass = np.where(klass < 0, MISSING_CODE, klass).astype(np.uint8)
    # short titles: the class legend goes below the plots, where it cannot run into the horizon's title
    fig = make_subplots(rows=1, cols=3, shared_yaxes=True, horizontal_spacing=0.04,
                        subplot_titles=("LCB at h (p)", "horizon h", "class"))
    y = np.arange(1, g.n_steps + 1)
    fig.add_trace(go.Heatmap(z=lcb, x=g.positions, y=y, zmin=0, zmax=NO_VALUE, colorscale=percent_scale(),
                             showscale=False, hovertemplate="pos %{x} · step %{y}<br>LCB %{z}%<extra></extra>"), 1, 1)
    hmax = int(horizon[horizon != MISSING_CODE].max()) if (horizon != MISSING_CODE).any() else 1
    blues = [f"rgba(49,130,189,{(k + 1) / (hmax + 1):.2f})" for k in range(hmax + 1)]
    fig.add_trace(go.Heatmap(z=horizon, x=g.positions, y=y, zmin=-0.5, zmax=MISSING_CODE, showscale=False,
                             colorscale=categorical_missing_scale(blues),
                             hovertemplate="pos %{x} · step %{y}<br>h=%{z}<extra></extra>"), 1, 2)
    fig.add_trace(go.Heatmap(z=klass, x=g.positions, y=y, zmin=-0.5, zmax=MISSING_CODE,
                             colorscale=categorical_missing_scale(CLASS_COLOURS),
                             showscale=False, customdata=np.array(CLASS_NAMES + [""], dtype=object)[
                                 np.where(klass == MISSING_CODE, len(CLASS_NAMES), klass)],
                             hovertemplate="pos %{x} · step %{y}<br>class %{customdata}<extra></extra>"),
                  1, 3)
    fig.add_trace(go.Scatter(**{k: v for k, v in colour_bar("LCB as p").items() if k != "type"}), 1, 1)
    fig.update_layout(shapes=[c for i in (1, 2, 3)
                              for c in cursor(step, edge=True, xref=f"x{i} domain" if i > 1 else "x domain", yref="y")])
    fig.update_yaxes(autorange="reversed")
    fig.update_yaxes(title_text="step", row=1, col=1)
    fig.update_xaxes(title_text="position", title_standoff=4)
    for ann in fig.layout.annotations:                       # the subplot titles, small enough for their panel
        ann.font = dict(size=11)
    scale = (f"horizon h: <span style='color:{blues[0]}'>■</span> 0 … <span style='color:{blues[-1]}'>■</span> "
             f"{hmax} forwards ahead")
    classes = "classes: " + " · ".join(f"<span style='color:{c}'>■</span> {n}" for n, c in
                                      zip(CLASS_NAMES, CLASS_COLOURS))
    fig.update_layout(height=rows_height(g.n_steps, 130, 300), template="unmask",
                      margin=dict(l=50, r=60, t=40, b=96),
                      annotations=list(fig.layout.annotations) + [
                          dict(text=scale, x=0.5, xanchor="center", y=-0.2, yanchor="top", xref="paper",
                               yref="paper", showarrow=False, font=dict(size=11)),
                          dict(text=classes, x=1.0, xanchor="right", y=-0.28, yanchor="top", xref="paper",
                               yref="paper", showarrow=False, font=dict(size=11))])
    return fig
