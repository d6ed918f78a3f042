"""The attention mask a forward used, drawn as a matrix (rows = queries, columns = keys, dark = may attend).

How to read: for an S2D2 verify forward the 2L mask has four quadrants: top-left the draft-filled block under a
token-causal mask, bottom-left each [MASK] query seeing only the drafts before it, bottom-right the identity.
The verified span is outlined. Every query also sees the whole cache (not drawn). Draft forwards show the block
pattern (all ones, or partial-causal with draft_ver). For a SimSD verification, rows and columns are the block
(leftover tokens, then the drafts D labelled with the drafter's reveal step t) and the mask copies M: copy M_i sees
the drafts revealed before step t_i and the copies of the rest, i.e. the block as it was just before the drafter
revealed slot i.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from engine.catalogue.cards import VerifyFields
from engine.decoders.s2d2.card import S2D2DraftFields, S2D2VerifyFields
from engine.decoders.simsd.card import SimSDVerifyFields
from engine.records.trace import fields
from explorer.scrub import block_label      # one numbering with the text's line: blocks from 1
from explorer.views.heatmaps import empty_figure


MASKED = (S2D2DraftFields, VerifyFields)     # the records that carry their attention mask (S2D2's and SimSD's)


def nearest_masked_record(trace, step: int | None):
    s = len(trace.records) - 1 if step is None else step
    for i in range(min(s, len(trace.records) - 1), -1, -1):
        f = fields(trace.records[i], *MASKED)
        if f is not None and f.attn_mask is not None:
            return i
    return None


def attention_mask(trace, step: int | None = None, grid=None, selected: int | None = None) -> go.Figure:
    i = nearest_masked_record(trace, step)
    fig = go.Figure()
    if i is None:
        return empty_figure("no attention mask recorded by this step")
    r = trace.records[i]
    f = fields(r, *MASKED)
    m = np.asarray(f.attn_mask).astype(int)
    lo = int(r.positions[0])
    L = len(r.positions)
    simsd = fields(r, SimSDVerifyFields)
    if simsd is not None and simsd.step_of is not None:   # SimSD: block rows, then one copy per drafted slot
        t = np.asarray(simsd.step_of)
        a, n = simsd.span
        labels = [f"{lo + k}" if k < a - lo else f"D{lo + k} t={t[k]}" for k in range(L)]
        labels += [f"M{a + k} t={t[a - lo + k]}" for k in range(n)]
    elif r.kind == "verify":
        labels = [f"y{lo + k}" for k in range(L)] + [f"M{lo + k}" for k in range(L)]
    else:
        labels = [f"{lo + k}" for k in range(m.shape[0])]
    fig.add_trace(go.Heatmap(z=m, x=labels, y=labels[:m.shape[0]], colorscale=[[0, "#f7f7f7"], [1, "#08519c"]],
                             showscale=False, xgap=1, ygap=1,
                             hovertemplate="query %{y} → key %{x}: %{z}<extra></extra>"))
    s2d2 = fields(r, S2D2VerifyFields)
    span = s2d2.span if s2d2 is not None else None
    if span:
        a, n = span[0] - lo, span[1]
        for off in (0, L):  # outline the span in both halves
            fig.add_shape(type="rect", x0=a - 0.5 + off, x1=a + n - 0.5 + off, y0=a - 0.5 + L, y1=a + n - 0.5 + L,
                          line=dict(color="crimson", width=2))
    # automargin: SimSD's copy labels ("M39 t=5") are wider than the margin a block's position numbers need
    fig.update_layout(height=420, template="unmask", yaxis=dict(autorange="reversed", automargin=True),
                      xaxis=dict(automargin=True), margin=dict(l=50, r=10, t=36, b=30),
                      title=dict(text=f"attention mask of step {i + 1} ({r.kind}, block {block_label(r.block)})", x=0.01,
                                 font=dict(size=14)))
    return fig
