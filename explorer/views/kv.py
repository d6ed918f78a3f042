"""Fast-dLLM's approximate caches (kv_cache prefix / dual on LLaDA and Dream): which K/V each forward computed and
how far its logits drifted from an uncached forward.

How to read: each row is one forward, each column a generated position. Green = the forward computed that position's
K/V afresh; grey = it read them from the cache made by its block's first forward (stale: they do not see what the
block has committed since). A block's first forward is all green; with ``prefix`` the block and everything after it
stay green; with ``dual`` only the block does (the prompt's K/V are stale in every cached forward too). The right
panel plots the drift when the run measured it (``measure_drift``): the max |Δ logit| over the block's slots
between the cached forward and an uncached one of the same canvas.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from explorer.grid import Grid
from explorer.views.heatmaps import MASKED, cursor, discrete_scale, step_position_figure, empty_figure

COLOURS = [MASKED, "#74c476"]


def fresh_map(trace, step: int | None = None, grid: Grid | None = None, selected: int | None = None) -> go.Figure:
    if not any(r.kv.kv_fresh is not None for r in trace.records):
        return empty_figure("Fresh and stale K/V are recorded with kv_cache=prefix or dual on a full-attention model "
                      "(LLaDA, Dream).")
    g = grid or Grid.of(trace)
    z = np.zeros((g.n_steps, g.end - g.P), np.int8)
    for s, r in enumerate(trace.records):
        a, b = r.kv.kv_fresh or (0, 0)
        z[s, max(0, a - g.P):max(0, b - g.P)] = 1
    data = [dict(type="heatmap", z=z, x=g.labels, y=np.arange(1, g.n_steps + 1), zmin=-0.5, zmax=1.5,
                 colorscale=discrete_scale(COLOURS), showscale=False,
                 customdata=np.where(z == 1, "computed afresh", "read from the block start's cache"),
                 hovertemplate="pos %{x} · step %{y}<br>K/V %{customdata}<extra></extra>")]
    data += [dict(type="scatter", x=[None], y=[None], mode="markers", name=name, showlegend=True,
                  marker=dict(symbol="square", size=10, color=c)) for name, c in (("stale", COLOURS[0]),
                                                                                  ("fresh", COLOURS[1]))]
    title = f"K/V per forward ({trace.meta.cache})"
    return step_position_figure(data, g, step, title, selected, margin=dict(r=130),
                                legend=dict(orientation="v", x=1.01, xanchor="left", y=1, yanchor="top"))


def drift(trace, step: int | None = None, grid: Grid | None = None, selected: int | None = None) -> go.Figure:
    rows = [(s + 1, r.kv.drift) for s, r in enumerate(trace.records) if r.kv.drift is not None]
    if not rows:
        return empty_figure("Run with measure_drift on (and kv_cache prefix or dual) to see the drift per forward.")
    x, y = zip(*rows)
    fig = go.Figure(go.Scatter(x=x, y=y, mode="lines+markers", line=dict(color="#d94801"),
                               hovertemplate="step %{x}: max |Δ logit| %{y:.4f}<extra></extra>"))
    return fig.update_layout(height=280, template="unmask", margin=dict(l=60, r=10, t=36, b=40),
                             title=dict(text="drift: cached vs uncached logits, max |Δ| over the block", x=0.01,
                                        font=dict(size=14)),
                             xaxis=dict(title="step", range=[0.5, len(trace.records) + 0.5]),
                             yaxis=dict(title="max |Δ logit|", rangemode="tozero"),
                             shapes=cursor(step if step is not None else len(trace.records) - 1, axis="x"))
