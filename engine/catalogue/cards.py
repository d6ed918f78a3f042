"""Decoder cards: everything a decoder in its own folder adds besides its rule, as one torch-free object.

A decoder folder ``engine/decoders/<name>/`` holds ``policy.py`` (its ``Policy`` over the block loop; torch) and
``card.py`` (``CARD``, a ``Card``; torch-free). Every index the rest of Unmask reads is built from the cards by one
scan, so adding such a decoder touches only its folder, its view module and its tests:

- the catalogue's decoders, parameters and menu (``engine.catalogue.catalogue``; the Sweep's dial is ``Decoder.knob``);
- the commit-reason codes and the record contracts (``engine.records.trace``);
- the page's views and tabs (``explorer.registry``) and the reasons' colours (``explorer.views.reasons``);
- its bench counters and columns (``engine.harness.bench``) and its summary cards (``explorer.views.summary``);
- the glossary (``explorer.glossary``), the pre-baked examples (``tools.experiments.bake_examples``) and the
  Sweep's presets (``explorer.page.sweep``).
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np

from engine.catalogue.params import Decoder, Param


@dataclass(frozen=True)
class ReasonEntry:
    """A commit reason the decoder adds: its code in ``StepRecord.reason`` (stable: traces on disk hold it), its
    label and colour on the commit-reason map, and its short tag in the GIF."""
    code: int
    label: str
    colour: str
    tag: str


@dataclass(frozen=True)
class ViewEntry:
    """A view of the page, as ``explorer.registry.View`` takes it; ``render`` and ``doc`` are named, not imported,
    so the engine stays free of the page: ``"explorer.views.<module>:<function>"`` and the module whose docstring
    is the "how to read this" ("" = none)."""
    name: str
    label: str
    tab: str
    render: str
    doc: str = ""
    scrub: str = "cursor"
    positions: bool = False     # a step × position map: a click on a cell selects that position


@dataclass(frozen=True)
class Example:
    """The pre-baked example of the decoder (assets/examples/<name>.npz): its setting, the held-out task and how
    many of its first test problems the bake may try, the embedded model it runs on (None: the page's), and what
    the decode must show (``tools.experiments.bake_examples.SHOWS``: "rejects", "revises", "lookahead", "right",
    "turned_right"; "" = the first decode)."""
    setting: dict
    task: str = "story"
    problems: int = 10
    model: str | None = None
    shows: str = ""


@dataclass(frozen=True)
class SweepPreset:
    """A grid of the page's Sweep a decoder brings besides its dial: each template is a SPEC in which ``{t}`` takes
    every dial value and ``{b}`` the block size; every setting then gets its block size and the visitor's keys."""
    name: str
    templates: tuple[str, ...]
    words: str                           # what it varies, in the decoder menu's words


@dataclass(frozen=True)
class BenchCounts:
    """What a decoder adds to a bench row (``engine.harness.bench``): ``count(trace) -> dict`` of numbers summed
    over a setting's problems, then ``columns(sums, problems) -> dict`` the row's own columns made from those sums
    (each one of ``names``; a column named like a common one, such as ``tpf``, replaces it)."""
    count: Callable
    columns: Callable
    names: tuple[str, ...]


@dataclass(frozen=True)
class VerifyFields:
    """What a verify record of every draft-and-verify decoder carries (its card's verify payload subclasses this,
    so the verifier's map, the bench's rejection count and the tour read any of them)."""
    attn_mask: np.ndarray         # the verification forward's attention mask (bool)
    draft_tokens: np.ndarray      # (L,) the draft being verified
    q_top: np.ndarray             # (L,) the verifier's argmax (-1 where nothing was drafted)
    accepted: int                 # accepted prefix length
    rejected_at: int | None       # absolute position of the first rejection
    resampled: int | None         # the token committed there instead
    span: list                    # [first absolute position, number of drafted slots examined]
    verdict: np.ndarray           # (L,) Verdict codes
    ratio: np.ndarray             # (L,) acceptance ratio, NaN outside the examined span
    p_draft: np.ndarray           # (L,) the drafter's p of its token
    q_draft: np.ndarray           # (L,) the verifier's q of that token


@dataclass(frozen=True)
class RunSummary:
    """A decoder's own totals of a run (its card's ``summary_type`` subclasses this; its policy's ``summary``
    returns one). Saved flat beside the trace's metadata and read back with ``TraceMeta.own``; every field has a
    default, so a trace saved before a field existed still loads."""


@dataclass(frozen=True)
class SpeculativeSummary(RunSummary):
    """The totals every draft-and-verify decoder has (the bench's acceptance column reads them)."""
    accepted_tokens: int = 0         # drafted tokens a verifier accepted


@dataclass(frozen=True)
class Card:
    decoder: Decoder
    menu: tuple[str, str]                                   # (group, plain words) in the page's decoder menu
    rank: int = 0                                           # its place in its menu group
    params: dict[str, Param] = field(default_factory=dict)  # the parameters only this decoder reads
    reasons: dict[str, ReasonEntry] = field(default_factory=dict)   # Reason member name -> entry
    records: dict[str, type] = field(default_factory=dict)  # record kind ("draft") -> the dataclass of its payload
    views: tuple[ViewEntry, ...] = ()
    shows: tuple[type, ...] = ()         # record payloads whose presence shows the views' tab for a run
    hides: tuple[str, ...] = ()          # tabs such a run hides (their views do not fit it)
    tab_note: str = ""                   # the note above that tab
    glossary: tuple[tuple[str, str], ...] = ()              # (term, meaning) rows of the glossary
    example: Example | None = None
    sweeps: tuple[SweepPreset, ...] = ()
    bench: BenchCounts | None = None
    # parameter -> (the released code's default, why ours differs): a default we chose is said, never silent
    reference_defaults: dict = field(default_factory=dict)
    # the run's own summary cards on the page: meta (TraceMeta) -> ([(label, value, hint)], [notes])
    summary: Callable | None = None
    summary_type: type | None = None     # its RunSummary subclass: the run's own totals in the trace's metadata


DECODERS_DIR = Path(__file__).resolve().parents[1] / "decoders"     # engine/decoders/: one folder a decoder


@lru_cache(maxsize=None)
def cards() -> dict[str, Card]:
    """Every decoder folder's card, by decoder name (imported once; the folders' ``card.py`` are torch-free).
    The decoders are plug-ins: the ground floor finds their cards by scanning the folders and never imports a
    policy: it lists the folders on disk and imports each ``card`` module by name, so no import statement of
    the ground floor names a floor above it (tests/test_floors.py: no import goes up, no circle)."""
    found = {}
    for m in pkgutil.iter_modules([str(DECODERS_DIR)]):
        if m.ispkg:
            card = importlib.import_module(f"engine.decoders.{m.name}.card").CARD
            assert card.decoder.name == m.name, f"the card in {m.name}/ names {card.decoder.name}"
            found[m.name] = card
    return found


def card_reasons() -> dict[str, int]:
    """Every card's commit reasons: member name -> code."""
    return {k: r.code for c in cards().values() for k, r in c.reasons.items()}
