"""No text box of a figure runs into another: every view of every pre-baked example, drawn by Plotly.js in
Chromium at the page's widths, with the bounding boxes of its axis titles, tick labels, legend, colour bars,
title and subplot titles compared pairwise. The browser test calls the same functions
(``tests/test_figure_layout.py``).

    python -m tools.page.bench_figures [--out results/bench_figures.json]

Each figure is drawn alone in a box as wide as its plot on the page (the output column at 1500×1100, a 780 px
window's two columns, and a phone at 390×844), at the middle and the last step of its run, with the page's own
fitting (``assets/js/legend_under.js``: a title wider than its figure breaks into lines at any width; a figure under
700 px gets its legend under the plot and a few upright position labels). Two boxes collide when they overlap by
more than ``SLACK`` pixels in both directions; tick labels of one axis count against each other too (an illegible
axis), but never against their own axis's title's gap. A title, an axis title or a tick label running past the
figure's left or right edge (cut off) counts as a collision too, and so does, on a narrow figure, a legend left
beside or above its plot.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from tools import provenance

# px: the plot's width in the output column, measured on the page: a 1500 px window, a 780 px one (a projector
# at 150 % zoom, a half-screen window) and a 390 px phone
WIDTHS = {"desktop": 780, "half": 386, "phone": 350}
SLACK = 1.5                                # px of overlap tolerated (anti-aliasing, rounding)
EXAMPLES = Path(__file__).resolve().parents[2] / "assets" / "examples"
JS = Path(__file__).resolve().parents[2] / "assets" / "js"

# the text boxes of one figure, each with the group it belongs to; a group is one label or one axis's tick labels
BOXES = """(div) => { const out = [];
  const add = (el, group) => { const b = el.getBBox(), m = el.getScreenCTM();   // a rotated label's own corners
    if (!b.width || !b.height || !el.textContent.trim()) return;
    const pt = (x, y) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f];
    out.push({group, text: el.textContent.trim().slice(0, 40), corners: [pt(b.x, b.y), pt(b.x + b.width, b.y),
      pt(b.x + b.width, b.y + b.height), pt(b.x, b.y + b.height)]}); };
  div.querySelectorAll('.xtick text, .ytick text').forEach((e) => add(e, 'tick ' +
    (e.closest('[class*=xaxislayer], [class*=yaxislayer]') || {}).getAttribute?.('class')));
  div.querySelectorAll('[class^=g-x] text, [class^=g-y] text, .g-gtitle text').forEach((e, i) => add(e, 'title ' + i));
  div.querySelectorAll('.legend .legendtext').forEach((e, i) => add(e, 'legend ' + i));
  div.querySelectorAll('.colorbar .cbtitle text, .colorbar .cbaxis text').forEach((e, i) => add(e, 'colorbar ' + i));
  div.querySelectorAll('.annotation-text').forEach((e, i) => add(e, 'annotation ' + i));
  return out; }"""


# the titles (the figure's, its axes', its colour bars') and the tick labels (a right-hand axis's too) that run
# past the figure's left or right edge: cut off
CLIPPED = """(div) => { const svg = div.querySelector('.main-svg'); if (!svg) return [];
  const r = svg.getBoundingClientRect(), out = [];
  div.querySelectorAll('.g-gtitle text, [class^=g-x] text, [class^=g-y] text, .colorbar .cbtitle text, ' +
                       'g[class$=tick] > text').forEach((e) => {
    const b = e.getBoundingClientRect();
    if (b.width && e.textContent.trim() && (b.left < r.left - SLACK || b.right > r.right + SLACK))
      out.push(e.textContent.trim().slice(0, 60)); });
  return out; }"""


BESIDE = """() => [...document.querySelectorAll('body > div[id^=f]')].map((gd) => { const fl = gd._fullLayout;
  return fl && fl.showlegend && (fl.legend.orientation !== 'h' || fl.legend.y >= 1) && gd.querySelector('.legend .traces') ?
    parseInt(gd.id.slice(1)) : -1; }).filter((i) => i >= 0)"""


# the text boxes and the cut labels of every figure drawn, in one call (one round trip per figure is seconds)
EVERY = (f"(n) => [...Array(n).keys()].map((i) => {{ const div = document.getElementById('f' + i); "
         f"return [({BOXES})(div), ({CLIPPED.replace('SLACK', str(SLACK))})(div)]; }})")


def figures(names: list[str] | None = None) -> list[tuple[str, str, int, dict]]:
    """(example, view, 1-based step, figure JSON) for every figure view of every pre-baked example's shown tabs,
    at the middle and the last step (the first holds the least text: the others cover what it could collide)."""
    from engine.records.trace import Trace
    from explorer import registry
    from explorer.grid import Grid
    out = []
    for path in sorted(EXAMPLES.glob("*.npz")):
        if names and path.stem not in names:
            continue
        trace, tabs = Trace.load(path), None
        tabs = registry.tabs_shown(trace)
        g, n = Grid.of(trace), len(trace.records)
        for view in (v for t in tabs for v in registry.in_tab(t)):
            for s in sorted({n // 2, n - 1}):
                fig = view.render(trace, s, g, None)
                if hasattr(fig, "to_plotly_json"):
                    out.append((path.stem, view.name, s + 1, json.loads(fig.to_json())))
    return out


def page_html(figs: list[tuple[str, str, int, dict]], width: int) -> str:
    """One page drawing every figure in its own box of the given width, as the page does (responsive). Static:
    without the drag layers and hover handlers nothing moves a text box (198 figures at two widths gave the same
    boxes) and drawing takes 15-20 % less (8.3 -> 6.5 s, 10.4 -> 9.1 s a width)."""
    from plotly.offline import get_plotlyjs
    divs = "".join(f'<div id="f{i}" style="width:{width}px"></div>' for i in range(len(figs)))
    data = json.dumps([f[3] for f in figs])
    return (f"<html><head><meta charset='utf-8'><script>{get_plotlyjs()}</script></head><body>{divs}<script>"
            f"const F = {data}; const narrow = {'true' if width < 700 else 'false'};"
            # the page's scrub.js (thinTicks) shows 6 upright position labels on a map narrower than 700 px
            "F.forEach((f) => { const ax = f.layout.xaxis; if (narrow && ax && ax.type === 'category') "
            "Object.assign(ax, {nticks: 6, tickangle: -90}); });"
            "window.drawn = Promise.all(F.map((f, i) => Plotly.newPlot('f' + i, f.data, f.layout, "
            "{responsive: true, staticPlot: true})))"
            ".then(() => Promise.all(F.map((f, i) => { const gd = document.getElementById("
            "'f' + i); const u = narrow && legendUnder(gd, true); return (u ? Plotly.relayout(gd, u) : Promise.resolve())"
            + ".then(() => { const w = titleWrap(gd); return w ? Plotly.relayout(gd, w) : null; })" * 4 + "; })));"
            # the page's legend_under.js, as scrub.js applies it after each draw
            f"{(JS / 'legend_under.js').read_text()}</script></body></html>")


def depths(corners, i, j) -> np.ndarray:
    """How far the pairs (i[k], j[k]) of convex quadrilaterals (an array of corner lists) overlap: for each pair, the
    smallest overlap of their projections over the edge normals of both (separating axes); <= 0 where they do not
    touch. All the pairs at once (numpy): a figure has hundreds of labels."""
    c = np.asarray(corners, dtype=float).reshape(-1, 4, 2)
    edge = np.roll(c, -1, axis=1) - c                                   # each box's four edges
    normal = np.stack([-edge[..., 1], edge[..., 0]], axis=-1)
    length = np.linalg.norm(normal, axis=-1, keepdims=True)
    normal = normal / np.where(length == 0, 1.0, length)               # a zero edge projects everything to 0
    axes = np.concatenate([normal[i], normal[j]], axis=1)               # [pair, 8 axes, xy]
    pi, pj = np.einsum("pcd,pad->pac", c[i], axes), np.einsum("pcd,pad->pac", c[j], axes)
    return (np.minimum(pi.max(-1), pj.max(-1)) - np.maximum(pi.min(-1), pj.min(-1))).min(-1)


def depth(a: list, b: list) -> float:
    """How far two convex quadrilaterals (corner lists) overlap; <= 0 when they do not touch (``depths``)."""
    return float(depths([a, b], [0], [1])[0])


def collisions(boxes: list[dict]) -> list[tuple[str, str]]:
    """Pairs of boxes of different groups, or two tick labels of one axis, overlapping by more than SLACK. Only
    pairs whose upright bounding boxes overlap by more than SLACK both ways are measured: the separating-axis depth
    is the smallest overlap over every direction, so it never exceeds the overlap along x or along y."""
    if len(boxes) < 2:
        return []
    c = np.asarray([b["corners"] for b in boxes], dtype=float)
    lo, hi = c.min(axis=1), c.max(axis=1)
    upright = np.minimum(hi[:, None], hi[None]) - np.maximum(lo[:, None], lo[None])     # [box, box, xy]
    i, j = np.nonzero(np.triu((upright > SLACK).all(axis=-1), k=1))
    hits = []
    for a, b in (ab for ab, d in zip(zip(i, j), depths(c, i, j)) if d > SLACK):
        a, b = boxes[a], boxes[b]
        if a["group"] == b["group"] and not a["group"].startswith("tick"):
            continue
        hits.append((f"{a['group']}: {a['text']}", f"{b['group']}: {b['text']}"))
    return hits


def check(pg, figs, width: int) -> list[dict]:
    """Draw the figures at one width in an open Playwright page; one row per figure that has a collision."""
    with tempfile.TemporaryDirectory() as d:
        html = Path(d) / "figures.html"
        html.write_text(page_html(figs, width), encoding="utf-8")
        # a slow or busy machine takes minutes to draw ~300 figures: the waits bound a hang, not the speed
        pg.goto(html.as_uri(), wait_until="domcontentloaded", timeout=300_000)
        pg.wait_for_function("() => window.drawn", timeout=600_000)
        pg.evaluate("() => window.drawn")
        rows = []
        for (example, view, step, _), (boxes, clipped) in zip(figs, pg.evaluate(EVERY, len(figs))):
            hits = collisions(boxes) + [("clipped", text) for text in clipped]
            if hits:
                rows.append(dict(example=example, view=view, step=step, width=width, collisions=hits[:5]))
        # a legend still standing beside or above its plot on a phone (legend_under.js moves it under)
        beside = pg.evaluate(BESIDE) if width < 700 else []
        rows += [dict(example=figs[i][0], view=figs[i][1], step=figs[i][2], width=width,
                      collisions=[("legend", "beside the plot")]) for i in beside]
        return rows


def measure(names: list[str] | None = None) -> dict:
    from playwright.sync_api import sync_playwright

    from tools.page.bench_ux import launch
    figs = figures(names)
    with sync_playwright() as p:
        browser = launch(p)
        pg = browser.new_page(viewport={"width": 1500, "height": 1100})
        res = {k: check(pg, figs, w) for k, w in WIDTHS.items()}
        browser.close()
    return dict(figures=len(figs), examples=len({f[0] for f in figs}), **res)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="", help="write the result as JSON here")
    ap.add_argument("--example", action="append", help="only these examples (by file stem)")
    args = ap.parse_args(argv)
    res = measure(args.example)
    for k in WIDTHS:
        print(f"{k}: {len(res[k])} of {res['figures']} figures with a collision")
        for r in res[k]:
            print("  ", r["example"], r["view"], "step", r["step"], r["collisions"][:2])
    if args.out:
        provenance.write(args.out, res, argv)


if __name__ == "__main__":
    main()
