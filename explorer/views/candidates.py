"""The selected position at the current step: its top-k candidates with probabilities, and its status.

How to read: the bars are the model's five most likely tokens for this position at this forward (untempered
softmax). A tall first bar with a short second one is a confident, stable choice; two bars of similar height mean
the model has not made up its mind, which is where parallel commits go wrong.
"""

from __future__ import annotations

from explorer.grid import Grid
from explorer.scrub import candidates_html, payload


def candidates(trace, step: int | None = None, grid: Grid | None = None, selected: int | None = None) -> str:
    d = payload(trace, grid)
    s = d["n"] - 1 if step is None else min(max(int(step), 0), max(d["n"] - 1, 0))
    return candidates_html(d, s, selected)
