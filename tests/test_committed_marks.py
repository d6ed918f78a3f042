"""The × that marks a committed cell in the step × position maps (confidence, entropy, the rivals' maps) can be
seen wherever it lies: on the light page, on the dark theme's figure block, and on every colour of the maps'
Viridis scale (a verify or commit forward leaves its committed cells empty, so the × often lies on the page itself;
a white × vanished there on the light page, 1:1, and on a sure cell's yellow, 1.1:1). WCAG asks 3:1 of a graphic
that carries meaning: the better of the mark's fill and its rim must reach it on each background."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from plotly.colors import get_colorscale, sample_colorscale

from explorer.views.heatmaps import committed_marks

# the light page, the dark theme's block behind a figure (gradio's neutral-800) and its page (neutral-950)
PAGES = ["#ffffff", "#27272a", "#0f0f11"]


def rgb(colour: str) -> tuple[int, ...]:
    colour = {"white": "#ffffff", "black": "#000000"}.get(colour, colour)
    if colour.startswith("#"):
        return tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return tuple(int(float(v)) for v in colour[colour.index("(") + 1:-1].split(",")[:3])


def ratio(a: str, b: str) -> float:
    lin = lambda v: v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4  # noqa: E731
    lum = lambda c: sum(w * lin(x / 255) for w, x in zip((0.2126, 0.7152, 0.0722), rgb(c)))  # noqa: E731
    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_the_committed_cross_reads_at_3_to_1_on_the_pages_and_every_map_colour():
    grid = SimpleNamespace(committed=np.array([[True, False], [False, True]]), labels=np.array(["0 a", "1 b"]))
    [trace] = committed_marks(grid)
    marker = trace["marker"]
    # a line-only symbol (x-thin, open) shows its line alone; a filled one its fill and its rim
    drawn = [marker["line"]["color"]] + ([] if marker["symbol"].endswith("-thin") or "open" in marker["symbol"]
                                          else [marker["color"]])
    backgrounds = PAGES + sample_colorscale(get_colorscale("Viridis"), [i / 10 for i in range(11)])
    worst = {bg: max(ratio(c, bg) for c in drawn) for bg in backgrounds}
    assert min(worst.values()) >= 3, worst
    assert list(trace["y"]) == [1, 2] and list(trace["x"]) == ["0 a", "1 b"]      # one × per committed cell


def test_no_committed_cell_draws_no_mark():
    assert committed_marks(SimpleNamespace(committed=np.zeros((3, 4), bool), labels=np.array(list("abcd")))) == []
