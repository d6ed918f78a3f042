"""S2D2 verifier map over step x position: what happened to each drafted token.

How to read: green = draft accepted by the verifier, red = rejected and resampled from the residual
max(q − p, 0), yellow = in the verified span but behind a rejection (stays masked), blue = committed by the
fallback threshold rule, grey = committed by another rule. Hover shows the draft token, p(x̂), q(x̂) and the
acceptance ratio min(1, q/p).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from explorer.grid import Grid
from explorer.views.heatmaps import _decorate, discrete_scale

NONE, ACCEPTED, RESAMPLED, FALLBACK, PENDING, OTHER = 0, 1, 2, 3, 4, 5
LABELS = ["", "accepted", "rejected → resampled", "fallback commit", "span, not reached", "committed (rule)"]
COLOURS = ["#ffffff", "#31a354", "#de2d26", "#3182bd", "#fec44f", "#bdbdbd"]
REASON_ACCEPT, REASON_RESAMPLE, REASON_FALLBACK = 5, 6, 7


def verifier_grid(trace, g: Grid):
    shape = (g.n_steps, g.end - g.P)
    code = np.zeros(shape, np.int8)
    p, q, ratio = (np.full(shape, np.nan, np.float32) for _ in range(3))
    draft = np.full(shape, -1, np.int64)
    for s, r in enumerate(trace.records):
        cols = r.positions - g.P
        keep = (cols >= 0) & (cols < shape[1])
        reason = np.asarray(r.reason)
        c = np.where(reason == REASON_ACCEPT, ACCEPTED, np.where(reason == REASON_RESAMPLE, RESAMPLED,
                     np.where(reason == REASON_FALLBACK, FALLBACK, np.where(reason > 0, OTHER, NONE))))
        if r.kind == "verify":
            c = np.where((np.asarray(r.extra.get("verdict", 0)) == 4) & (c == NONE), PENDING, c)
            for name, arr in (("p_draft", p), ("q_draft", q), ("ratio", ratio)):
                if name in r.extra:
                    arr[s, cols[keep]] = np.asarray(r.extra[name])[keep]
            if "draft_tokens" in r.extra:
                draft[s, cols[keep]] = np.asarray(r.extra["draft_tokens"])[keep]
        code[s, cols[keep]] = c[keep]
    return code, p, q, ratio, draft


def verifier_map(trace, step: int | None = None, grid: Grid | None = None, selected: int | None = None) -> go.Figure:
    g = grid or Grid(trace)
    code, p, q, ratio, draft = verifier_grid(trace, g)
    names = {int(t): trace.token_str(int(t)) for t in np.unique(draft) if t >= 0}
    hover = np.empty(code.shape, dtype=object)
    for (s, j), c in np.ndenumerate(code):
        if c == NONE:
            hover[s, j] = ""
        elif np.isnan(p[s, j]):
            hover[s, j] = LABELS[c]
        else:
            hover[s, j] = (f"{LABELS[c]}<br>draft {names.get(int(draft[s, j]), '?')!r}<br>p={p[s, j]:.3f} "
                           f"q={q[s, j]:.3f} ratio={ratio[s, j]:.3f}")
    n = len(COLOURS)
    scale = discrete_scale(COLOURS)
    fig = go.Figure(go.Heatmap(z=code, x=g.positions, y=np.arange(g.n_steps), zmin=-0.5, zmax=n - 0.5,
                               colorscale=scale, showscale=False, text=hover,
                               hovertemplate="pos %{x} · step %{y}<br>%{text}<extra></extra>"))
    for i in range(1, n):  # legend entries
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=LABELS[i],
                                 marker=dict(size=10, color=COLOURS[i], symbol="square")))
    fig.update_layout(legend=dict(orientation="h", y=-0.18))
    return _decorate(fig, g, step, "verifier map (rows: forwards · draft rows show fallback commits)", selected)
