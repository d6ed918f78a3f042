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

from engine.catalogue.cards import ViewEntry, cards
from engine.catalogue.catalogue import DECODERS
from engine.records.trace import fields
from explorer.views import heatmaps, kv, reasons, revise


@dataclass(frozen=True)
class View:
    name: str
    label: str
    tab: str
    render: Callable
    doc: ModuleType | None      # whose docstring is the "how to read this" under the view (None: shared note)
    scrub: str = "cursor"       # "cursor" or "server"
    positions: bool = False     # a step × position map: a click on a cell selects that position (scrub.js)
    previews: bool = False      # the map a dragged dial's preview marks (scrub.js's tune by eye)

    @property
    def elem_id(self) -> str:
        return f"{self.name}-plot"


def entropy(trace, step, grid, selected):
    return heatmaps.confidence(trace, step, grid, selected, field="entropy")


def card_view(v: ViewEntry) -> View:
    """A view a decoder's card names (engine.catalogue.cards): its render function and its "how to read this" module."""
    module, function = v.render.split(":")
    return View(v.name, v.label, v.tab, getattr(importlib.import_module(module), function),
                importlib.import_module(v.doc) if v.doc else None, v.scrub, v.positions)


# the views every decode has (a block loop's maps, its revisions, its cache); the decoders' own views come from
# their cards, in menu order, between the revisions and the cache
CORE = (View("mask", "Mask state", "Decode", heatmaps.mask_state, None, positions=True),
        View("conf", "Confidence", "Decode", heatmaps.confidence, None, positions=True, previews=True),
        View("entropy", "Entropy", "Decode", entropy, heatmaps, positions=True),
        View("reason", "Commit reasons", "Decode", reasons.reason_map, reasons, positions=True),
        View("history", "Token history of the selected position", "Revisions", revise.token_history, None,
             "server"))
CACHE = (View("kv", "Fresh and stale K/V", "KV cache", kv.fresh_map, None),
         View("drift", "Drift of the cached logits", "KV cache", kv.drift, kv))
CARDS = tuple(cards()[name] for name in DECODERS)      # menu order
VIEWS: tuple[View, ...] = CORE + tuple(card_view(v) for c in CARDS for v in c.views) + CACHE
TABS: tuple[str, ...] = tuple(dict.fromkeys(v.tab for v in VIEWS))
TAB_NOTES = {"Revisions": "Decoders that change their mind (edit, wino, remdm), EB's entropy bound and Dream's "
                          "ranking. On the maps of the Decode tab a purple diamond marks every revised cell.",
             "KV cache": "Fast-dLLM's prefix and dual caches on full-attention models are approximate: these views "
                         "show which K/V each forward recomputed and, with measure_drift, what that cost in logits."}
for _c in CARDS:      # a card's note heads its tab unless the tab already has one (first card in menu order wins)
    if _c.tab_note:
        TAB_NOTES.setdefault(_c.views[0].tab, _c.tab_note)
BY_NAME = {v.name: v for v in VIEWS}


def has(trace, *contracts: type) -> bool:
    """Whether any record of the trace carries one of these payloads (a card's record dataclass, or a base of it)."""
    return any(fields(r, *contracts) is not None for r in trace.records)


# which core tabs have something to show for a run, read from its records (no decoder is named)
CORE_SHOWS = {"Decode": lambda tr: True,
              "Revisions": lambda tr: bool(tr.revisions()),
              "KV cache": lambda tr: any(r.kv.kv_fresh is not None for r in tr.records)}


def tabs_shown(trace) -> list[str]:
    """The view tabs with something to show for this run, in page order: a core tab by its rule, a card's tab when
    a record carries one of the card's payloads, minus the tabs such a card hides. A tab without anything to show is
    hidden, never an empty placeholder."""
    if trace is None:
        return []
    present = [c for c in CARDS if c.shows and has(trace, *c.shows)]
    shown = {t for t, rule in CORE_SHOWS.items() if rule(trace)} | {v.tab for c in present for v in c.views}
    hidden = {t for c in present for t in c.hides}
    return [t for t in TABS if t in shown and t not in hidden]


def views_shown(trace) -> list[View]:
    """The views with something to show for this run, in the tabs it shows: a card's view when a record carries
    one of its card's payloads, a core view whenever its tab shows (the Revisions tab of an edit run holds its token
    history, not EB's, WINO's and Dream's placeholders)."""
    tabs = set(tabs_shown(trace))
    owner = {v.name: c for c in CARDS for v in c.views}
    return [v for v in VIEWS if v.tab in tabs and (v.name not in owner or has(trace, *owner[v.name].shows))]


def in_tab(tab: str | None) -> tuple[View, ...]:
    return tuple(v for v in VIEWS if v.tab == tab)


def names_in(tab: str | None) -> set[str]:
    return {v.name for v in in_tab(tab)}
