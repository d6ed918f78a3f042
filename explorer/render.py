"""Every view of the Decode page for one trace and step, in the order the page shows them.

Each view is a pure function ``view(trace, step, grid, selected)`` (``step`` 0-based or None for the last,
``selected`` an absolute position or None); the summary also takes the checker's verdict.
"""

from __future__ import annotations

from explorer.grid import Grid
from explorer.views import heatmaps
from explorer.views.attention import attention_mask
from explorer.views.candidates import candidates
from explorer.views.ce_maps import ce_maps
from explorer.views.reasons import reason_map
from explorer.views.router import router_timeline
from explorer.views.simsd import simsd_rounds
from explorer.views.summary import render_summary
from explorer.views.text import render_text
from explorer.views.trajectory import trajectories
from explorer.views.verifier import verifier_map


def entropy(trace, step, grid, selected):
    return heatmaps.confidence(trace, step, grid, selected, field="entropy")


VIEWS = (render_text, heatmaps.mask_state, heatmaps.confidence, entropy, reason_map, verifier_map,
         router_timeline, attention_mask, simsd_rounds, trajectories, ce_maps, candidates)


def render_all(trace, step: int | None, verdict: str | None = None, selected: int | None = None) -> tuple:
    """(summary, *VIEWS) for the page's view components."""
    g = Grid.of(trace)
    return (render_summary(trace, verdict), *(view(trace, step, g, selected) for view in VIEWS))
