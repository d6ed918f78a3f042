"""Dream's sampler: how the step ranked the masked slots under its score, and which it revealed.

How to read: one bar per masked slot at the chosen step, sorted by the score of Dream's ``alg`` (maskgit_plus: p of
the token drawn; topk_margin: p(top 1) − p(top 2); entropy: Σ p log p, higher = surer), best first. Dark bars were
revealed by the step: the best int(n_masked · (1 − s/t)), or, with alg_temp > 0, a draw that favours high scores
(so a dark bar can sit right of a light one). ``origin`` reveals slots at random and ranks nothing.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from engine.decoders.dream.card import DreamFields
from engine.records.trace import fields
from explorer.views.heatmaps import empty_figure
from explorer.grid import Grid


def ranking(trace, step: int | None = None, grid: Grid | None = None, selected: int | None = None) -> go.Figure:
    s = len(trace.records) - 1 if step is None else int(step)
    i = next((t for t in range(s, -1, -1) if (f := fields(trace.records[t], DreamFields)) is not None
              and f.dream_score is not None), None)
    if i is None:
        return empty_figure("Dream's sampler records each step's scores: run the dream decoder on a Dream or LLaDA model.")
    r = trace.records[i]
    f = fields(r, DreamFields)
    score = np.asarray(f.dream_score, dtype=np.float64)
    ok = np.flatnonzero(~np.isnan(score))
    if not len(ok):
        return empty_figure(f"step {i + 1} ({f.alg}): slots revealed at random, no ranking")
    order = ok[np.argsort(-score[ok], kind="stable")]
    labels = [f"{int(r.positions[k])} {trace.token_str(int(r.candidate[k]))}" for k in order]
    fig = go.Figure(go.Bar(x=labels, y=score[order], marker_color=np.where(r.committed[order], "#08519c", "#c6dbef"),
                           hovertemplate="%{x}: score %{y:.4f}<extra></extra>"))
    return fig.update_layout(height=300, template="unmask", margin=dict(l=60, r=10, t=36, b=70),
                             title=dict(text=f"step {i + 1}: masked slots by {f.alg} score, revealed dark",
                                        x=0.01, font=dict(size=14)), yaxis=dict(title="score"))
