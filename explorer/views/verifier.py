"""S2D2 verifier map over step x position: what happened to each drafted token.

How to read: green = draft accepted by the verifier, red = rejected and resampled from the residual
max(q − p, 0), yellow = in the verified span but behind a rejection (stays masked), blue = committed by the
fallback threshold rule, grey = committed by another rule. Hover shows the draft token, p(x̂), q(x̂) and the
acceptance ratio min(1, (q/p)^γ).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from engine.catalogue.cards import VerifyFields
from engine.records.trace import Reason, Verdict, fields
from explorer.grid import Grid
from explorer.tokens import token_labels
from explorer.views.heatmaps import step_position_figure

# map codes: the Verdict values, plus OTHER for a commit by another rule
NONE, ACCEPTED, RESAMPLED, FALLBACK, PENDING = (int(v) for v in Verdict)
OTHER = len(Verdict)
LABELS = ["", "accepted", "rejected → resampled", "fallback commit", "span, not reached", "committed (rule)"]
COLOURS = ["#ffffff", "#31a354", "#de2d26", "#3182bd", "#fec44f", "#bdbdbd"]


def verifier_grid(trace, g: Grid):
    shape = (g.n_steps, g.end - g.P)
    code = np.zeros(shape, np.int8)
    p, q, ratio = (np.full(shape, np.nan, np.float32) for _ in range(3))
    draft = np.full(shape, -1, np.int64)
    for s, r in enumerate(trace.records):
        cols = r.positions - g.P
        keep = (cols >= 0) & (cols < shape[1])
        reason = np.asarray(r.reason)
        c = np.where(reason == Reason.ACCEPT, ACCEPTED, np.where(reason == Reason.RESAMPLE, RESAMPLED,
                     np.where(reason == Reason.FALLBACK, FALLBACK, np.where(reason > 0, OTHER, NONE))))
        f = fields(r, VerifyFields)
        if f is not None:
            c = np.where((np.asarray(f.verdict if f.verdict is not None else 0) == Verdict.PENDING) & (c == NONE),
                         PENDING, c)
            for value, arr in ((f.p_draft, p), (f.q_draft, q), (f.ratio, ratio), (f.draft_tokens, draft)):
                if value is not None:
                    arr[s, cols[keep]] = np.asarray(value)[keep]
        code[s, cols[keep]] = c[keep]
    return code, p, q, ratio, draft


def verifier_map(trace, step: int | None = None, grid: Grid | None = None, selected: int | None = None) -> go.Figure:
    g = grid or Grid.of(trace)
    code, p, q, ratio, draft = verifier_grid(trace, g)
    cells = np.argwhere(code > 0)                                        # sparse: one marker per event
    kinds = code[cells[:, 0], cells[:, 1]] if len(cells) else np.zeros(0, np.int8)
    toks = token_labels(trace, draft[cells[:, 0], cells[:, 1]]) if len(cells) else np.zeros(0, object)
    data = []
    for c in range(1, len(COLOURS)):
        sel = kinds == c
        if not sel.any():
            continue
        s_, j = cells[sel, 0], cells[sel, 1]
        data.append(dict(type="scatter", x=g.labels[j], y=s_ + 1, mode="markers", name=LABELS[c], text=toks[sel],
                         customdata=np.stack([p[s_, j], q[s_, j], ratio[s_, j]], 1),
                         marker=dict(symbol="square", size=9, color=COLOURS[c]),
                         hovertemplate="pos %{x} · step %{y}<br>draft %{text}<br>p=%{customdata[0]:.3f} "
                                       "q=%{customdata[1]:.3f} ratio=%{customdata[2]:.3f}<extra>"
                                       + LABELS[c] + "</extra>"))
    return step_position_figure(data, g, step, "verifier map (rows: forwards; draft rows show fallback commits)",
                                selected, legend=dict(orientation="v", x=1.01, xanchor="left", y=1, yanchor="top"), showlegend=True,
                                margin=dict(r=150))
