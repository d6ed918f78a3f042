"""CE heatmaps over step x position: forecast lower bound at the horizon, the horizon, the trajectory class.

How to read: LCB is shown as a probability (sigmoid of ẑ − κσ_h at each position's own horizon); cells at or
above τ are where look-ahead may commit. The horizon grows with decoded left context and shrinks with the
filter's uncertainty. Classes: converging, oscillatory (vetoed from early commits), stalled, stable-high.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.grid import Grid
from explorer.views.heatmaps import discrete_scale

CLASS_NAMES = ["none", "converging", "oscillatory", "stalled", "stable-high"]
CLASS_COLOURS = ["#f0f0f0", "#31a354", "#de2d26", "#969696", "#3182bd"]


def _field(trace, g: Grid, key: str, fill=np.nan, dtype=np.float32) -> np.ndarray:
    out = np.full((g.n_steps, g.end - g.P), fill, dtype=dtype)
    for s, r in enumerate(trace.records):
        if key not in r.extra:
            continue
        cols = r.positions - g.P
        keep = (cols >= 0) & (cols < out.shape[1])
        out[s, cols[keep]] = np.asarray(r.extra[key])[keep]
    return out


def ce_maps(trace, step: int | None = None, grid: Grid | None = None) -> go.Figure:
    g = grid or Grid(trace)
    lcb = 1 / (1 + np.exp(-_field(trace, g, "lcb_h")))
    horizon = _field(trace, g, "horizon", -1, np.float32)
    horizon[horizon < 0] = np.nan
    klass = _field(trace, g, "klass", -1, np.float32)
    klass[klass < 0] = np.nan
    fig = make_subplots(rows=1, cols=3, shared_yaxes=True, horizontal_spacing=0.03,
                        subplot_titles=("forecast LCB at horizon (as p)", "horizon h", "trajectory class"))
    y = np.arange(g.n_steps)
    fig.add_trace(go.Heatmap(z=lcb, x=g.positions, y=y, zmin=0, zmax=1, colorscale="Viridis", showscale=False,
                             hovertemplate="pos %{x} · step %{y}<br>LCB p=%{z:.3f}<extra></extra>"), 1, 1)
    fig.add_trace(go.Heatmap(z=horizon, x=g.positions, y=y, colorscale="Blues", showscale=False,
                             hovertemplate="pos %{x} · step %{y}<br>h=%{z}<extra></extra>"), 1, 2)
    n = len(CLASS_COLOURS)
    scale = discrete_scale(CLASS_COLOURS)
    names = np.vectorize(lambda c: "" if np.isnan(c) else CLASS_NAMES[int(c)], otypes=[object])(klass)
    fig.add_trace(go.Heatmap(z=klass, x=g.positions, y=y, zmin=-0.5, zmax=n - 0.5, colorscale=scale,
                             showscale=False, text=names,
                             hovertemplate="pos %{x} · step %{y}<br>%{text}<extra></extra>"), 1, 3)
    if step is not None:
        fig.add_hline(y=step, line=dict(color="crimson", width=2))
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(height=max(280, min(560, 60 + 8 * g.n_steps)), template="plotly_white",
                      margin=dict(l=50, r=10, t=40, b=30))
    return fig
