"""Step x position heatmaps: mask state, confidence and entropy, with block boundaries and a step cursor.

How to read: each row is one forward (step), each column a generated position. In the mask map grey = still
masked, blue = decoded earlier, orange = committed at that step. In the confidence map a cell shows the top-1
probability of the candidate at a still-masked position; the staircase of blocks runs down and to the right.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from explorer.grid import Grid

def discrete_scale(colours: list[str]) -> list[list]:
    """A stepped colorscale: integer z in 0..n-1 (with zmin=-0.5, zmax=n-0.5) gets colours[z]."""
    n = len(colours)
    stops = []
    for i, c in enumerate(colours):
        stops += [[i / n, c], [(i + 1) / n if i == n - 1 else (i + 1) / n - 1e-6, c]]
    return stops


STATE_COLOURS = discrete_scale(["#d9d9d9", "#9ecae1", "#fd8d3c"])


def _decorate(fig: go.Figure, g: Grid, step: int | None, title: str, selected: int | None = None) -> go.Figure:
    for e in g.block_edges():
        fig.add_vline(x=g.P + e - 0.5, line=dict(color="#444", width=1, dash="dot"))
    if step is not None:
        fig.add_hline(y=step, line=dict(color="crimson", width=2))
    if selected is not None:
        fig.add_vline(x=selected, line=dict(color="crimson", width=1))
    fig.update_layout(title=dict(text=title, x=0.01, font=dict(size=14)), height=max(260, min(620, 60 + 9 * g.n_steps)),
                      margin=dict(l=50, r=10, t=36, b=36), xaxis_title="position", yaxis_title="step",
                      yaxis=dict(autorange="reversed"), template="plotly_white")
    return fig


def _hover_tokens(trace, ids: np.ndarray) -> np.ndarray:
    uniq = {int(t): trace.token_str(int(t)) for t in np.unique(ids) if t >= 0}
    uniq[-1] = ""
    return np.vectorize(lambda t: uniq.get(int(t), "?"), otypes=[object])(ids)


def mask_state(trace, step: int | None = None, grid: Grid | None = None, selected: int | None = None) -> go.Figure:
    g = grid or Grid(trace)
    text = _hover_tokens(trace, g.tokens)
    fig = go.Figure(go.Heatmap(z=g.state, x=g.positions, y=np.arange(g.n_steps), zmin=-0.5, zmax=2.5,
                               colorscale=STATE_COLOURS, showscale=False, text=text,
                               hovertemplate="pos %{x} · step %{y}<br>%{text}<extra></extra>"))
    return _decorate(fig, g, step, "mask state (grey masked · blue decoded · orange committed now)", selected)


def confidence(trace, step: int | None = None, grid: Grid | None = None, selected: int | None = None,
               field: str = "confidence") -> go.Figure:
    g = grid or Grid(trace)
    z = getattr(g, field)
    text = _hover_tokens(trace, g.candidate)
    fig = go.Figure(go.Heatmap(z=z, x=g.positions, y=np.arange(g.n_steps), zmin=0, zmax=1,
                               colorscale="Viridis", text=text, colorbar=dict(thickness=10),
                               hovertemplate="pos %{x} · step %{y}<br>candidate %{text}<br>"
                                             f"{field} %{{z:.3f}}<extra></extra>"))
    committed = np.argwhere(g.committed)
    if len(committed):
        fig.add_trace(go.Scatter(x=g.positions[committed[:, 1]], y=committed[:, 0], mode="markers",
                                 marker=dict(symbol="x-thin", size=6, line=dict(width=1.5, color="white")),
                                 hoverinfo="skip", showlegend=False))
    label = "confidence (top-1 p of masked positions; × = committed)" if field == "confidence" else \
        "normalised entropy of masked positions"
    return _decorate(fig, g, step, label, selected)
