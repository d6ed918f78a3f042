"""A dependency-free SVG scatter plot for the README's figures (plotly's static export needs kaleido, which this
project does not ship). Points per family, and a step line along each family's Pareto front as given."""

from __future__ import annotations

from html import escape

import numpy as np

COLOURS = ("#3182bd", "#e6550d", "#31a354", "#756bb1", "#636363")
W, H, PAD = 640, 400, 56


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    return list(np.linspace(lo, hi, n))


def scatter_svg(series: dict[str, list[tuple[float, float, str]]], fronts: dict[str, list[str]] | None = None,
                x_label: str = "", y_label: str = "", title: str = "") -> str:
    """``series``: family -> [(x, y, hover text)], x > 0 (drawn on a log axis). Empty families are skipped.
    ``fronts``: family -> the hover texts of its Pareto front (``pareto.fronts``), joined by a step line."""
    pts = [(float(np.log10(x)), y) for s in series.values() for x, y, _ in s]
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    y0, y1 = min(p[1] for p in pts), max(p[1] for p in pts)
    dx, dy = (x1 - x0) or 1.0, (y1 - y0) or 1.0
    x0, x1, y0, y1 = x0 - 0.05 * dx, x1 + 0.05 * dx, y0 - 0.05 * dy, y1 + 0.05 * dy

    def sx(x):  # x in data units
        return PAD + (np.log10(x) - x0) / (x1 - x0) * (W - 2 * PAD)

    def sy(y):
        return H - PAD - (y - y0) / (y1 - y0) * (H - 2 * PAD)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" '
           f'font-size="11"><rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="18" text-anchor="middle" font-size="13">{escape(title)}</text>',
           f'<text x="{W / 2}" y="{H - 12}" text-anchor="middle">{escape(x_label)}</text>',
           f'<text x="14" y="{H / 2}" text-anchor="middle" transform="rotate(-90 14 {H / 2})">{escape(y_label)}</text>']
    for t in 10 ** np.array(_ticks(x0, x1)):
        out.append(f'<line x1="{sx(t):.1f}" x2="{sx(t):.1f}" y1="{PAD}" y2="{H - PAD}" stroke="#eee"/>'
                   f'<text x="{sx(t):.1f}" y="{H - PAD + 14}" text-anchor="middle">{t:.3g}</text>')
    for t in _ticks(y0, y1):
        out.append(f'<line x1="{PAD}" x2="{W - PAD}" y1="{sy(t):.1f}" y2="{sy(t):.1f}" stroke="#eee"/>'
                   f'<text x="{PAD - 4}" y="{sy(t) + 4:.1f}" text-anchor="end">{t:.3g}</text>')
    for k, (family, pts_f) in enumerate((f, s) for f, s in series.items() if s):
        colour = COLOURS[k % len(COLOURS)]
        if family in (fronts or {}):
            line = sorted({(x, y) for x, y, text in pts_f if text in fronts[family]})
            path = " ".join(f"{sx(a):.1f},{sy(b):.1f} {sx(c):.1f},{sy(b):.1f}" for (a, b), (c, _) in zip(line, line[1:]))
            path += f" {sx(line[-1][0]):.1f},{sy(line[-1][1]):.1f}"
            out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
        for x, y, text in pts_f:
            out.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="4" fill="{colour}" fill-opacity="0.8">'
                       f'<title>{escape(text)}: {x:.3f}, {y:.3f}</title></circle>')
        lx = PAD + 110 * k                                    # the legend: one row under the title
        out.append(f'<circle cx="{lx}" cy="34" r="4" fill="{colour}"/>'
                   f'<text x="{lx + 8}" y="38">{escape(family)}</text>')
    return "\n".join(out + ["</svg>"])
