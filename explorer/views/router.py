"""S2D2 router timeline: per draft step, the score against its threshold(s) and the verify/skip decision.

How to read: the line is the router's score s = K̂ − c (static) or K̂ − c·N_hi (dynamic); dashed lines are the
thresholds (τ_score, or τ_on / τ_off for hysteresis). Filled markers = verify, hollow = skip. The bars below show
the first masked span |C_t|, N_hi (tokens the threshold rule would take anyway) and K̂ (expected accepted tokens).
For UCB the lower panel also shows each arm's upper confidence bound in the step's context bucket.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from engine.decoders.s2d2.card import S2D2DraftFields
from engine.records.trace import own_records
from explorer.views.heatmaps import cursor, empty_figure, hline


def router_rows(trace) -> list[tuple[int, dict]]:
    return [(s, f.router) for s, _, f in own_records(trace, S2D2DraftFields) if f.router is not None]


def router_timeline(trace, step: int | None = None, grid=None, selected: int | None = None) -> go.Figure:
    rows = router_rows(trace)
    if not rows:
        return empty_figure("no router decisions in this run: its decoder verifies without a router")
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.6, 0.4])
    x = np.array([s + 1 for s, _ in rows])   # 1-based steps, as on the slider
    score = np.array([d["score"] if d["score"] is not None and math.isfinite(d["score"]) else np.nan
                      for _, d in rows])
    decision = np.array([d["decision"] for _, d in rows])
    fig.add_trace(go.Scatter(x=x, y=score, mode="lines", name="score s", line=dict(color="#555")), 1, 1)
    for flag, sym, name in ((True, "circle", "verify"), (False, "circle-open", "skip")):
        sel = decision == flag
        fig.add_trace(go.Scatter(x=x[sel], y=score[sel], mode="markers", name=name,
                                 marker=dict(symbol=sym, size=9, color="#31a354" if flag else "#de2d26"),
                                 customdata=np.array([[d["span"][1] if d["span"] else 0, d["n_hi"], d["k_hat"]]
                                                      for _, d in rows])[sel] if sel.any() else None,
                                 hovertemplate="step %{x}<br>score s=%{y:.3f}<br>first masked span |C_t| = "
                                               "%{customdata[0]}<br>N_hi (tokens τ takes anyway) = %{customdata[1]}"
                                               "<br>K̂ (expected accepted tokens) = %{customdata[2]:.2f}<extra>" + name +
                                               "</extra>"), 1, 1)
    first = rows[0][1]
    shapes = [hline(first[key], color=colour, dash="dash", xref="x domain", yref="y")
              for key, colour in (("tau_score", "#3182bd"), ("tau_on", "#31a354"), ("tau_off", "#de2d26"))
              if key in first]
    if "state_before" in first:
        on = np.array([d["decision"] for _, d in rows], float)
        fig.add_trace(go.Scatter(x=x, y=on, mode="lines", line=dict(shape="hv", color="#fd8d3c"),
                                 name="hysteresis on", yaxis="y2", visible="legendonly"), 1, 1)
    span = [d["span"][1] if d["span"] else 0 for _, d in rows]
    fig.add_trace(go.Bar(x=x, y=span, name="|C_t|: first masked span", marker_color="#9ecae1"), 2, 1)
    fig.add_trace(go.Bar(x=x, y=[d["n_hi"] for _, d in rows], name="N_hi: tokens τ takes anyway", marker_color="#fdae6b"), 2, 1)
    fig.add_trace(go.Scatter(x=x, y=[d["k_hat"] for _, d in rows], name="K̂: expected accepted tokens", mode="lines+markers",
                             line=dict(color="#756bb1")), 2, 1)
    if "ucb" in first:
        for arm, colour in ((0, "#de2d26"), (1, "#31a354")):
            fig.add_trace(go.Scatter(x=x, y=[d["ucb"][arm] for _, d in rows], mode="markers",
                                     name=f"UCB {'skip' if arm == 0 else 'verify'}",
                                     marker=dict(symbol="diamond", color=colour, size=6)), 2, 1)
    shapes += cursor(step, axis="x")
    title = f"router: {first['router']} ({first.get('score_type', '')}, c={first.get('cost')})"
    # the legend sits above the panels, clear of the step axis's title below them, and carries the router's name
    # as its own title line: a figure title would sit where a phone wraps the legend to three lines. It is
    # anchored right: the page's label of the plot covers its top-left corner
    fig.update_layout(shapes=shapes, height=460, template="unmask", barmode="group",
                      margin=dict(l=60, r=10, t=30, b=46),
                      legend=dict(orientation="h", x=1, xanchor="right", y=1.02, yanchor="bottom",
                                  title=dict(text=f"<b>{title}</b>", side="top")))
    fig.update_xaxes(title_text="step", row=2, col=1)
    fig.update_yaxes(title_text="score s", row=1, col=1)
    fig.update_yaxes(title_text="tokens", row=2, col=1)
    return fig
