"""Attention-mask explorer: the patterns the engine builds, for any block size and span, as labelled matrices.

How to read: rows are queries, columns are keys; dark = may attend. Block-causal: each block sees itself and every
earlier block (the K/V of finished blocks can be cached exactly). 2L verifier (S2D2): the draft-filled block y under
a token-causal mask, then one [MASK] query per position that sees only the drafts before it. Partial-causal
drafting (S2D2 draft_ver): the decided prefix of the block is encoded token-causally, masked rows see the whole
block. SimSD temporal: the draft tokens D (labelled with the step t that revealed them) and one mask copy M per
token; M_i sees exactly the block as it was just before step t_i, so one target forward replays the draft's whole
denoising order. The span is outlined in red. The matrices come from ``engine.models.masks``, the same code the
decoders run.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from engine.catalogue.catalogue import PARAMS

from engine.models import masks

KINDS = ("block-causal", "2L verifier", "partial-causal draft", "SimSD temporal")


B_MAX = PARAMS["block_size"].page[1]   # the page's block-size range, from the catalogue


def mask_matrix(kind: str, B: int, span_start: int = 0, blocks: int = 3) -> tuple[np.ndarray, list[str], list[str]]:
    """(matrix, row labels, column labels) for one pattern."""
    if kind == "block-causal":
        pos = np.arange(blocks * B)
        labels = [f"{p} (b{p // B})" for p in pos]
        return masks.block_causal(pos, pos, B), labels, labels
    if kind == "2L verifier":
        m = masks.verifier_2l(0, B)
        labels = [f"y{i}" for i in range(B)] + [f"M{i}" for i in range(B)]
        return m, labels, labels
    if kind == "partial-causal draft":
        m = masks.partial_causal_draft(0, B, span_start)
        labels = [f"{'x' if i < span_start else 'M'}{i}" for i in range(B)]
        return m, labels, labels
    if kind == "SimSD temporal":  # leftover = span_start decided tokens; drafts revealed in a fixed shuffled order
        n = B - span_start
        steps = np.random.default_rng(B).permutation(n) + 1
        m = masks.simsd_temporal(0, span_start, steps)
        labels = ([f"x{i}" for i in range(span_start)] + [f"D{span_start + i} t{steps[i]}" for i in range(n)]
                  + [f"M{span_start + i} t{steps[i]}" for i in range(n)])
        return m, labels, labels
    raise ValueError(f"unknown mask kind {kind!r}")


def mask_explorer(kind: str = "2L verifier", B: int = 4, span_start: int = 0, span_len: int | None = None) -> go.Figure:
    B = int(np.clip(B, 1, B_MAX))
    span_start = int(np.clip(span_start, 0, B - 1))
    span_len = B - span_start if span_len is None else int(np.clip(span_len, 1, B - span_start))
    m, rows, cols = mask_matrix(kind, B, span_start)
    fig = go.Figure(go.Heatmap(z=m.astype(np.uint8), x=list(range(len(cols))), y=list(range(len(rows))),
                               colorscale=[[0, "#f7f7f7"], [1, "#08519c"]], showscale=False, xgap=1, ygap=1,
                               hovertemplate="query %{y} → key %{x}: %{z}<extra></extra>"))
    shapes = []
    if kind == "2L verifier":
        for off in (0, B):
            shapes.append(dict(type="rect", x0=span_start - 0.5 + off, x1=span_start + span_len - 0.5 + off,
                               y0=span_start - 0.5 + B, y1=span_start + span_len - 0.5 + B,
                               line=dict(color="crimson", width=2)))
    elif kind == "partial-causal draft":
        shapes.append(dict(type="rect", x0=-0.5, x1=B - 0.5, y0=span_start - 0.5, y1=span_start + span_len - 0.5,
                           line=dict(color="crimson", width=2)))
    else:
        shapes += [dict(type="line", x0=b * B - 0.5, x1=b * B - 0.5, y0=-0.5, y1=len(rows) - 0.5,
                        line=dict(color="#444", dash="dot")) for b in range(1, len(rows) // B)]
    fig.update_layout(shapes=shapes, height=460, template="unmask", margin=dict(l=60, r=10, t=36, b=60),
                      title=dict(text=f"{kind}, B = {B}", x=0.01, font=dict(size=14)),
                      xaxis=dict(tickmode="array", tickvals=list(range(len(cols))), ticktext=cols, tickangle=-60),
                      yaxis=dict(tickmode="array", tickvals=list(range(len(rows))), ticktext=rows,
                                 autorange="reversed"))
    return fig
