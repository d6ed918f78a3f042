"""The uniform-noise canvas (DiffusionGemma's ``uniform`` decoder): what the canvas held at each denoising step,
and the stopping test that ended it.

How to read: in the canvas map each row is one forward and each column a generated position; a cell shows the token
the canvas held after that forward. Green = the step kept the model's sample there (inside the entropy bound), grey
= fresh random noise, blue = a canvas's output (its last step's argmax) and every finished canvas after it; a
canvas opens with its encoder forward, whose row is the initial noise. Hover a cell for the step's sample and its
entropy. The stopping panel draws each step's mean entropy (nats, log scale) against the confidence threshold and
marks the steps whose argmax canvas was stable (unchanged for ``stability_threshold`` steps); a canvas stops at the
first step that is both, or after ``max_denoising_steps``. Bars: the share of the canvas kept at each step. The EB
panel (the step's sorted entropies against γ) and the token history read the same records.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from engine.decoders.uniform.card import UniformFields
from engine.records.trace import own_records
from explorer.grid import Grid
from explorer.tokens import token_labels
from explorer.views.heatmaps import MASKED, cursor, discrete_scale, hline, step_position_figure, empty_figure

LATER, NOISE, KEPT, OUTPUT = 0, 1, 2, 3
COLOURS = ["rgba(0,0,0,0)", MASKED, "#74c476", "#6baed6"]     # a later cell: the page itself, in either theme
NAMES = {NOISE: "random noise", KEPT: "kept sample", OUTPUT: "output"}
MAX_LABELLED = 32    # columns up to which each cell prints its token (beyond, ~20 px a cell: they overprint)


def canvas_codes(trace, g: Grid) -> np.ndarray:
    """(steps, n) LATER / NOISE / KEPT / OUTPUT per cell."""
    codes = np.full((g.n_steps, g.end - g.P), LATER, np.int8)
    recs, done = trace.records, 0
    for s, r in enumerate(recs):
        codes[s, :done] = OUTPUT
        cols = r.positions - g.P
        keep = (cols >= 0) & (cols < codes.shape[1])
        if r.kind == "draft" and (s + 1 == len(recs) or recs[s + 1].kind == "encode"):
            codes[s, cols[keep]] = OUTPUT
            done = max(done, int(cols[keep].max()) + 1)
        else:
            codes[s, cols[keep]] = np.where(r.committed[keep], KEPT, NOISE)
    return codes


def _hover(trace, g: Grid, codes: np.ndarray) -> np.ndarray:
    held = token_labels(trace, g.tokens)
    out = np.where(codes == LATER, "not started", held).astype(object)
    for s, r, f in own_records(trace, UniformFields):
        if f.denoised is None:
            continue
        cols = r.positions - g.P
        sample, h = token_labels(trace, f.denoised), f.entropy_nats
        for k, j in enumerate(cols):
            if 0 <= j < out.shape[1]:
                out[s, j] = f"holds {held[s, j]} · sampled {sample[k]} · H {h[k]:.2f} nats · {NAMES[codes[s, j]]}"
    return out


def canvas_map(trace, step: int | None = None, grid: Grid | None = None, selected: int | None = None) -> go.Figure:
    if not any(f.denoised is not None for _, _, f in own_records(trace, UniformFields)):
        return empty_figure("The canvas map shows a uniform-noise decode: run the uniform decoder on a DiffusionGemma "
                      "model.")
    g = grid or Grid.of(trace)
    codes = canvas_codes(trace, g)
    text = np.where(codes == LATER, "", token_labels(trace, g.tokens)).astype(object)
    # a token in its cell only while the cells are wide enough to hold one (the hover always names it; a phone
    # drops them too: scrub.js)
    shown = "%{text}" if codes.shape[1] <= MAX_LABELLED else ""
    data = [dict(type="heatmap", z=codes, x=g.labels, y=np.arange(1, g.n_steps + 1), zmin=-0.5, zmax=3.5,
                 colorscale=discrete_scale(COLOURS), showscale=False, text=text, texttemplate=shown,
                 textfont=dict(size=9), customdata=_hover(trace, g, codes),
                 hovertemplate="pos %{x} · step %{y}<br>%{customdata}<extra></extra>")]
    data += [dict(type="scatter", x=[None], y=[None], mode="markers", name=name, showlegend=True,
                  marker=dict(symbol="square", size=10, color=COLOURS[code])) for code, name in NAMES.items()]
    return step_position_figure(data, g, step, "the canvas after each forward", selected,
                                legend=dict(orientation="v", x=1.01, xanchor="left", y=1, yanchor="top"),
                                margin=dict(r=130), height=max(360, 130 + 22 * g.n_steps))  # rows tall enough to read


def stopping(trace, step: int | None = None, grid: Grid | None = None, selected: int | None = None) -> go.Figure:
    own = [(s, r, f) for s, r, f in own_records(trace, UniformFields) if f.mean_entropy is not None]
    rows = [(s + 1, f.mean_entropy, f.stable, f.confident, r.committed.mean()) for s, r, f in own]
    if not rows:
        return empty_figure("The stopping test is recorded by the uniform decoder on every denoising step.")
    x, h, stable, confident, kept = (np.array(c) for c in zip(*rows))
    threshold = own[0][2].confidence_threshold
    fig = go.Figure([
        go.Bar(x=x, y=kept, yaxis="y2", name="share kept", marker_color="#c7e9c0", opacity=0.6,
               hovertemplate="step %{x}: %{y:.0%} kept<extra></extra>"),
        go.Scatter(x=x, y=np.maximum(h, 1e-6), mode="lines+markers", name="mean H (nats)", line=dict(color="#3182bd"),
                   marker=dict(size=9, symbol=np.where(stable, "circle", "circle-open"),
                               color=np.where(stable & confident, "#d94801", "#3182bd")),
                   text=np.where(stable, "stable", "changed"),
                   hovertemplate="step %{x}: mean H %{y:.4f} · argmax %{text}<extra></extra>")])
    encodes = [s + 1 for s, r in enumerate(trace.records) if r.kind == "encode"]
    shapes = [hline(threshold, color="#444", dash="dash", width=1)] + cursor(step if step is not None else
                                                                              len(trace.records) - 1, axis="x")
    shapes += [dict(type="line", x0=e, x1=e, y0=0, y1=1, xref="x", yref="paper", line=dict(color="#999", dash="dot",
                    width=1)) for e in encodes]
    return fig.update_layout(
        height=300, template="unmask", margin=dict(l=60, r=50, t=36, b=40), shapes=shapes,
        title=dict(text=f"stopping test: argmax stable (filled) and mean H < {threshold:g} (dashed); orange = both",
                   x=0.01, font=dict(size=14)),
        xaxis=dict(title="step", range=[0.5, len(trace.records) + 0.5]), yaxis=dict(type="log", title="mean H"),
        yaxis2=dict(overlaying="y", side="right", range=[0, 1], tickformat=".0%", showgrid=False),
        legend=dict(x=0.01, y=0.02, yanchor="bottom"))
