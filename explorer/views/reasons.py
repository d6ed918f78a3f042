"""Commit-reason map: which rule committed each token, and when (step x position), for any decoder.

How to read: each coloured cell is a commit; the colour names the rule (threshold, forced argmax, LLaDA quota,
S2D2 accept/resample/fallback, TSPD controller, CE look-ahead, stabilised, forced progress).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from engine.catalogue.cards import cards
from engine.records.trace import Reason
from explorer.grid import Grid
from explorer.tokens import token_labels
from explorer.views.heatmaps import step_position_figure

# every Reason: its label on the map, its colour, and its short tag in the GIF (explorer.gif)
REASONS = {Reason.AR: ("AR", "#969696", "ar"), Reason.THRESHOLD: ("threshold", "#3182bd", "τ"),
           Reason.ARGMAX: ("forced argmax", "#9ecae1", "max"), Reason.SCHEDULE: ("LLaDA quota", "#6baed6", "quota"),
           Reason.FORCED: ("forced by hand (branch)", "#e7298a", "hand"),
           Reason.SEEN: ("seen committed (recorded loop)", "#74c476", "seen")}
REASONS.update(sorted(((Reason[k], (r.label, r.colour, r.tag)) for c in cards().values() for k, r in c.reasons.items()),
                      key=lambda kv: kv[0]))
assert set(REASONS) == set(Reason) - {Reason.NONE}, "every commit reason has a label"


def reason_map(trace, step: int | None = None, grid: Grid | None = None, selected: int | None = None) -> go.Figure:
    g = grid or Grid.of(trace)
    cells = np.argwhere(g.reason > 0)                                   # sparse: one marker per commit
    codes = g.reason[cells[:, 0], cells[:, 1]] if len(cells) else np.zeros(0, np.int8)
    toks = token_labels(trace, g.tokens[cells[:, 0], cells[:, 1]]) if len(cells) else np.zeros(0, object)
    data = [dict(type="scatter", x=g.labels[cells[sel, 1]], y=cells[sel, 0] + 1, mode="markers", name=name,
                 text=toks[sel], marker=dict(symbol="square", size=9, color=colour),
                 hovertemplate="pos %{x} · step %{y}<br>%{text}<extra>" + name + "</extra>")
            for code, (name, colour, _) in REASONS.items() if (sel := codes == code).any()]
    return step_position_figure(data, g, step, "commit reasons (one square per committed token)", selected,
                                legend=dict(orientation="v", x=1.01, xanchor="left", y=1, yanchor="top"), showlegend=True,
                                margin=dict(r=150))
