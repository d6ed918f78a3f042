"""Revising decoders: what a position held at each step, how EB chose its prefix, and WINO's drafted vs kept.

How to read: the token history strip follows the selected position (click a token) step by step: grey while masked,
a dot per token it held; a purple diamond marks a revision (an edit, or a return to [MASK]). The EB panel shows the
step's masked slots sorted by entropy (nats), lowest first, and the bound's left side Σ H − max H rising with each
slot against γ: the slots left of where it crosses γ were committed together. The WINO panel counts, per step, the
slots drafted at the wide threshold and the drafted ones re-masked at the narrow threshold.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from engine.decoders.eb.card import EBFields
from engine.decoders.wino.card import WinoFields
from engine.records.trace import fields, own_records
from explorer.grid import Grid
from explorer.views.heatmaps import cursor, hline, empty_figure


def token_history(trace, step: int | None = None, grid: Grid | None = None, selected: int | None = None) -> go.Figure:
    """What the selected position held after each forward, up to the chosen step."""
    g = grid or Grid.of(trace)
    chosen = "" if selected is not None else " (click a token for another)"
    if selected is None and g.n_steps and g.end > g.P:
        # no position selected: the first one revised, else the one whose token changed most often, so the tab
        # opens on a history rather than a placeholder (WINO's and EB's Revisions tab showed one)
        changes = (g.tokens[1:] != g.tokens[:-1]).sum(axis=0)
        selected = g.P + (g.revisions[0][1] if g.revisions else int(np.argmax(changes)))
    if selected is None or not g.P <= selected < g.end:
        return empty_figure("Select a position (click a token) to see what it held at each step.")
    j, s = selected - g.P, g.n_steps - 1 if step is None else int(step)
    toks = g.tokens[: s + 1, j]
    mask_id = trace.meta.mask_token_id
    names = ["[MASK]" if t == mask_id else trace.token_str(int(t)) for t in toks]
    fig = go.Figure(go.Scatter(x=np.arange(1, s + 2), y=names, mode="lines+markers", line=dict(shape="hv"),
                               marker=dict(color=["#bdbdbd" if t == mask_id else "#3182bd" for t in toks]),
                               hovertemplate="step %{x}: %{y}<extra></extra>", name=f"pos {selected}"))
    rev = [(st, c) for st, jj, c, _, _ in g.revisions if jj == j and st <= s]
    if rev:
        fig.add_trace(go.Scatter(x=[st + 1 for st, _ in rev], y=[names[st] for st, _ in rev], mode="markers",
                                 marker=dict(symbol="diamond", size=13, color="#7a0177", line=dict(width=1.5, color="white")),
                                 name="revised", hoverinfo="skip"))
    return fig.update_layout(height=260, template="unmask", margin=dict(l=90, r=10, t=36, b=40),
                             title=dict(text=f"token history of position {selected}{chosen}", x=0.01,
                                        font=dict(size=14)),
                             # every step labelled only while a 350-px figure has room for them (12)
                             xaxis=dict(title="step", range=[0.5, max(s + 1, 2) + 0.5], dtick=1 if s < 12 else None,
                                        nticks=12),
                             yaxis=dict(type="category", title=""), shapes=cursor(s, axis="x"), showlegend=False)


def eb_prefix(trace, step: int | None = None, grid: Grid | None = None, selected: int | None = None) -> go.Figure:
    """EB's choice at the step: sorted entropies, the bound's left side against γ, the committed prefix."""
    g = grid or Grid.of(trace)
    s = g.n_steps - 1 if step is None else int(step)
    i = next((t for t in range(s, -1, -1) if (f := fields(trace.records[t], EBFields)) is not None
              and f.eb_order is not None), None)
    if i is None:
        return empty_figure("EB records its entropies and bound on every forward: run the eb decoder.")
    r = trace.records[i]
    f = fields(r, EBFields)
    rank, h, lhs = f.eb_order, f.entropy_nats, f.eb_bound
    order = np.argsort(np.where(rank >= 0, rank, 1 << 20))[: int((rank >= 0).sum())]
    labels = [f"{int(r.positions[k])} {trace.token_str(int(r.candidate[k]))}" for k in order]
    took = r.committed[order]
    fig = go.Figure(go.Bar(x=labels, y=h[order], marker_color=np.where(took, "#8c6d31", "#d9d9d9"), name="H (nats)",
                           hovertemplate="%{x}: H %{y:.3f}<extra></extra>"))
    fig.add_trace(go.Scatter(x=labels, y=lhs[: len(order)], mode="lines+markers", name="Σ H − max H",
                             line=dict(color="#de2d26")))
    return fig.update_layout(height=300, template="unmask", margin=dict(l=50, r=28, t=36, b=70),
                             title=dict(text=f"EB at step {i + 1}: committed (brown) while Σ H − max H ≤ γ = "
                                             f"{f.gamma:g}", x=0.01, font=dict(size=14)),
                             shapes=[hline(float(f.gamma), color="#444", dash="dash", width=1,
                                           xref="paper")], legend=dict(x=0.01, y=0.99))


def wino_counts(trace, step: int | None = None, grid: Grid | None = None, selected: int | None = None) -> go.Figure:
    rows = [(t + 1, f.drafted, f.rejected) for t, _, f in own_records(trace, WinoFields) if f.drafted is not None]
    if not rows:
        return empty_figure("WINO records what it drafted and re-masked on every forward: run the wino decoder.")
    x, drafted, rejected = (list(c) for c in zip(*rows))
    fig = go.Figure([go.Bar(x=x, y=drafted, name="drafted (≥ τ_wide)", marker_color="#9ecae1"),
                     go.Bar(x=x, y=rejected, name="re-masked (< τ_narrow)", marker_color="#de2d26")])
    # the legend under the step axis, outside the data: over the plot it hid the tops of the tallest bars
    return fig.update_layout(height=320, template="unmask", barmode="group", margin=dict(l=50, r=10, t=36, b=80),
                             title=dict(text="WINO: drafted vs re-masked per step", x=0.01, font=dict(size=14)),
                             xaxis=dict(title="step"), shapes=cursor(step if step is not None else len(trace.records) - 1,
                                                                      axis="x"),
                             legend=dict(orientation="h", x=0, y=-0.3, yanchor="top"))
