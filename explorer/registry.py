"""The one list of the Decode page's views: the layout builds a component per entry, the renderer loops over it,
and the browser's scrubber learns from it which figures it may move itself.

A view is a pure function ``render(trace, step, grid, selected)`` (``step`` 0-based or None for the last,
``selected`` an absolute position or None) returning a Plotly figure or HTML. ``scrub`` says what changes with the
step: ``"cursor"`` views differ between steps only by their shapes named ``cursor`` (at the 1-based step) and
``selected`` (the selected column), which the browser moves without asking the server; ``"server"`` views are
drawn again by the server when the step settles, and only while they are visible.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Callable

from engine.cards import ViewEntry, cards
from explorer.views import (attention, canvas, ce_maps, dream, heatmaps, kv, reasons, revise, router, simsd,
                            trajectory, verifier)


@dataclass(frozen=True)
class View:
    name: str
    label: str
    tab: str
    render: Callable
    doc: ModuleType | None      # whose docstring is the "how to read this" under the view (None: shared note)
    scrub: str = "cursor"       # "cursor" or "server"

    @property
    def elem_id(self) -> str:
        return f"{self.name}-plot"


def entropy(trace, step, grid, selected):
    return heatmaps.confidence(trace, step, grid, selected, field="entropy")


VIEWS: tuple[View, ...] = (
    View("mask", "Mask state", "Decode", heatmaps.mask_state, None),
    View("conf", "Confidence", "Decode", heatmaps.confidence, None),
    View("entropy", "Entropy", "Decode", entropy, heatmaps),
    View("reason", "Commit reasons", "Decode", reasons.reason_map, reasons),
    View("verifier", "Verifier map", "S2D2", verifier.verifier_map, verifier),
    View("router", "Router timeline", "S2D2", router.router_timeline, router),
    View("attn", "Attention mask of the step", "S2D2", attention.attention_mask, attention, "server"),
    View("simsd", "Reveal order and verdicts", "SimSD", simsd.simsd_rounds, simsd, "server"),
    View("traj", "Trajectories and forecast fan", "TSPD + CE", trajectory.trajectories, trajectory, "server"),
    View("ce", "Forecast LCB, horizon, class", "TSPD + CE", ce_maps.ce_maps, ce_maps),
    View("history", "Token history of the selected position", "Revisions", revise.token_history, None, "server"),
    View("eb", "EB: sorted entropies and the bound", "Revisions", revise.eb_prefix, None, "server"),
    View("wino", "WINO: drafted vs re-masked", "Revisions", revise.wino_counts, revise),
    View("dream", "Dream: the step's ranking", "Revisions", dream.ranking, dream, "server"),
    View("kv", "Fresh and stale K/V", "KV cache", kv.fresh_map, None),
    View("drift", "Drift of the cached logits", "KV cache", kv.drift, kv),
    View("canvas", "The canvas, step by step", "Canvas", canvas.canvas_map, None),
    View("stopping", "Stopping test", "Canvas", canvas.stopping, None),
    View("canvas_eb", "Sorted entropies and the bound", "Canvas", revise.eb_prefix, None, "server"),
    View("canvas_history", "Token history of the selected position", "Canvas", revise.token_history, canvas,
         "server"),
)


def card_view(v: ViewEntry) -> View:
    """A view a decoder's card names (engine.cards): its render function and its "how to read this" module."""
    module, function = v.render.split(":")
    return View(v.name, v.label, v.tab, getattr(importlib.import_module(module), function),
                importlib.import_module(v.doc) if v.doc else None, v.scrub)


VIEWS += tuple(card_view(v) for c in cards().values() for v in c.views)
TABS: tuple[str, ...] = tuple(dict.fromkeys(v.tab for v in VIEWS))
TAB_NOTES = {"Revisions": "Decoders that change their mind (edit, wino, remdm), EB's entropy bound and Dream's "
                          "ranking. On the maps of the Decode tab a purple diamond marks every revised cell.",
             "KV cache": "Fast-dLLM's prefix and dual caches on full-attention models are approximate: these views "
                         "show which K/V each forward recomputed and, with measure_drift, what that cost in logits.",
             "Canvas": "The uniform-noise decoder of DiffusionGemma: the canvas starts as random tokens and every "
                       "step keeps the lowest-entropy samples within the bound γ, renoising the rest.",
             "SimSD": "The round's temporal mask is the attention view in the S2D2 tab.",
             "TSPD + CE": "*PROPOSED: our reconstruction of TSPD + CE. The horizon rule's inputs and the feature "
                          "families come from the paper; the formulas are ours.*"}
BY_NAME = {v.name: v for v in VIEWS}


def has(trace, *fields: str) -> bool:
    """Whether any record of the trace carries one of these record fields."""
    return any(r.has(f) for r in trace.records for f in fields)


# which tabs have something to show for a run, read from what its records carry (no decoder is named): a tab
# without it is hidden, never an empty placeholder
TAB_SHOWS = {"Decode": lambda tr: not has(tr, "denoised"),            # a uniform canvas has its own maps
             "S2D2": lambda tr: has(tr, "attn_mask"),                 # S2D2's router and verifier, SimSD's mask
             "SimSD": lambda tr: has(tr, "step_of"),
             "TSPD + CE": lambda tr: has(tr, "horizon"),
             "Revisions": lambda tr: not has(tr, "denoised") and (bool(tr.revisions()) or has(
                 tr, "revised", "eb_order", "dream_score", "drafted")),     # the canvas shows its EB panel itself
             "KV cache": lambda tr: has(tr, "kv_fresh"),
             "Canvas": lambda tr: has(tr, "denoised")}


for _card in cards().values():    # a card's tab shows when a record carries one of the card's fields
    for _tab in {v.tab for v in _card.views}:
        TAB_SHOWS[_tab] = (lambda tr, was=TAB_SHOWS.get(_tab), f=_card.shows: (was is not None and was(tr))
                           or has(tr, *f))
    if _card.tab_note:
        TAB_NOTES.setdefault(_card.views[0].tab, _card.tab_note)


def tabs_shown(trace) -> list[str]:
    """The view tabs with something to show for this run, in page order."""
    return [t for t in TABS if trace is not None and TAB_SHOWS[t](trace)]


def in_tab(tab: str | None) -> tuple[View, ...]:
    return tuple(v for v in VIEWS if v.tab == tab)


def names_in(tab: str | None) -> set[str]:
    return {v.name for v in in_tab(tab)}
