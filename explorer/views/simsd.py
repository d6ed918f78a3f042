"""SimSD rounds: the drafter's reveal order against the target's verdict per slot, and the tokens each round kept.

How to read: left, one column per verification round and one dot per drafted slot, placed at the drafter's reveal
step t (1 = revealed first) and coloured by the target's verdict: green accepted, red rejected (the target's bonus
token was committed there), yellow drafted but behind a rejection (drafted again next round). Right, the tokens
each round committed: the accepted prefix plus the bonus token; a full bar means the whole draft was accepted.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from engine.decoders.simsd.card import SimSDVerifyFields
from engine.records.trace import Verdict, own_records
from explorer.views.heatmaps import empty_figure, vline

COLOURS = {Verdict.ACCEPTED: ("accepted", "#31a354"), Verdict.RESAMPLED: ("rejected → bonus", "#de2d26"),
           Verdict.PENDING: ("behind a rejection", "#fec44f")}


def simsd_rounds(trace, step: int | None = None, grid=None, selected: int | None = None) -> go.Figure:
    rounds = [(s, r, f) for s, r, f in own_records(trace, SimSDVerifyFields) if f.step_of is not None]
    if not rounds:
        return empty_figure("no SimSD round in this run")
    fig = make_subplots(rows=1, cols=2, column_widths=[0.6, 0.4], horizontal_spacing=0.08,
                        subplot_titles=("reveal step × verdict", "tokens kept"))
    for code, (name, colour) in COLOURS.items():
        xs, ys, text = [], [], []
        for k, (s, r, f) in enumerate(rounds):
            sel = np.flatnonzero(np.asarray(f.verdict) == code)
            xs += [k + 1] * len(sel)
            ys += np.asarray(f.step_of)[sel].tolist()
            text += [f"pos {int(r.positions[j])} · step {s + 1}" for j in sel]
        if xs:
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers", name=name, text=text,
                                     marker=dict(color=colour, size=10, symbol="square"),
                                     hovertemplate="round %{x} · reveal t=%{y}<br>%{text}<extra>" + name +
                                                   "</extra>"), 1, 1)
    kept = [f.accepted + (f.rejected_at is not None) for _, _, f in rounds]
    drafted = [f.span[1] for _, _, f in rounds]
    fig.add_trace(go.Bar(x=list(range(1, len(rounds) + 1)), y=drafted, marker_color="#e0e0e0", name="drafted",
                         showlegend=False), 1, 2)
    fig.add_trace(go.Bar(x=list(range(1, len(rounds) + 1)), y=kept, marker_color="#3182bd", name="kept"), 1, 2)
    if step is not None:
        now = [k for k, (s, _, _) in enumerate(rounds) if s <= step]
        if now:
            fig.add_shape(vline(now[-1] + 1, yref="y domain"), row=1, col=1)
    fig.update_layout(barmode="overlay", height=340, template="unmask", margin=dict(l=50, r=10, t=40, b=40),
                      legend=dict(orientation="h", y=-0.2))
    fig.update_xaxes(title_text="round", row=1, col=1)
    fig.update_yaxes(title_text="drafter reveal step t", row=1, col=1)
    fig.update_xaxes(title_text="round", row=1, col=2)
    return fig
