"""Every part of the Decode page for one trace and step: the panels (summary, text, candidates) and the views of
the registry (``explorer.registry``), as dicts keyed by name, so the page maps them onto its components.

``step`` is 0-based or None for the last, ``selected`` an absolute position or None.
"""

from __future__ import annotations

from explorer.grid import Grid
from explorer.views.candidates import candidates
from explorer.registry import VIEWS
from explorer.views.summary import render_summary
from explorer.views.text import render_text


def render_views(trace, step: int | None, selected: int | None = None, names=None) -> dict:
    """The registry's views (all, or those named), each rendered from the trace's one grid."""
    g = Grid.of(trace)
    return {v.name: v.render(trace, step, g, selected) for v in VIEWS if names is None or v.name in names}


def render_panels(trace, step: int | None, verdict: str | None = None, selected: int | None = None) -> dict:
    g = Grid.of(trace)
    return dict(summary=render_summary(trace, verdict), text=render_text(trace, step, g, selected),
                candidates=candidates(trace, step, g, selected))


def render_all(trace, step: int | None, verdict: str | None = None, selected: int | None = None) -> dict:
    """The panels and every view."""
    return {**render_panels(trace, step, verdict, selected), **render_views(trace, step, selected)}
