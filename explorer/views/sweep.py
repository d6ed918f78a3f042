"""Sweep plots: accuracy against TPF and against tokens/s for a grid of decoder settings, Pareto frontier drawn.

How to read: each point is one decoder setting run on the same held-out problems, labelled by what differs from
the decoder's defaults; the bar is its accuracy's 95 % Wilson interval, so two points whose bars overlap may not
differ at all. Up and to the right is better; the line joins the settings no other setting of that decoder beats on
both axes (its Pareto frontier), one colour per decoder, so "TSPD vs threshold" shows whose frontier lies above.
The grey point is AR (block size 1), the quality to aim for.
"""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from engine.harness import stats
from engine.catalogue.catalogue import BASELINE_DECODER


def pareto(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Indices of points not dominated (higher-or-equal x and y, one strictly), sorted by x."""
    idx = []
    for i in range(len(x)):
        dominated = np.any((x >= x[i]) & (y >= y[i]) & ((x > x[i]) | (y > y[i])))
        if not dominated:
            idx.append(i)
    return np.array(sorted(idx, key=lambda i: x[i]), dtype=int)


COLOURS = ("#3182bd", "#e6550d", "#31a354", "#756bb1")
AR_COLOUR = "#636363"


def interval(r: dict) -> tuple[float, float]:
    """The row's 95 % Wilson interval (computed from accuracy and n for rows stored before the bench kept it)."""
    if "accuracy_ci95" in r:
        return tuple(r["accuracy_ci95"])
    return stats.wilson(round(r["accuracy"] * r["n"]), r["n"])


SHARED = ("temperature", "gen_length")   # the sweep's own settings, the same for every point: not in its label
LABEL_GAP = (0.09, 0.05)                 # a label is kept this far (fractions of the x and y ranges) from the last


def short_label(spec: str) -> str:
    """'threshold:tau=0.9,block_size=8' -> 'τ 0.9 B 8': what a point's text shows ("AR" for the baseline)."""
    name, _, keys = spec.partition(":")
    if name == BASELINE_DECODER:
        return "AR"
    words = {"tau": "τ", "tau_s": "τ_s", "block_size": "B"}
    return " ".join(f"{words.get(k, k)} {v}" for k, _, v in (kv.partition("=") for kv in keys.split(",") if kv)
                    if k not in SHARED) or spec


def thinned(x: np.ndarray, y: np.ndarray, keep: set[int], span: tuple[float, float]) -> set[int]:
    """The points of ``keep`` whose labels fit: in order of x, one whose point is closer than LABEL_GAP to the last
    labelled one loses its label (its hover and the table still give it)."""
    out, last = set(), None
    for i in sorted(keep, key=lambda i: (x[i], y[i])):
        if last is None or abs(x[i] - x[last]) >= LABEL_GAP[0] * span[0] or \
                abs(y[i] - y[last]) >= LABEL_GAP[1] * span[1]:
            out.add(i)
            last = i
    return out


def labelled_rows(rows: list[dict], key: str) -> set[int]:
    """The rows (by ``id``) whose point carries its label on the ``key`` panel: AR's and each decoder's Pareto
    frontier's (the rest pile up; every point has its hover), thinned over all decoders together, so no two labels
    of one panel overprint, whoever's they are ("AR" ran into "τ 0.5 B 4")."""
    keep = []
    for fam in dict.fromkeys(r.get("decoder", "") for r in rows):
        sub = [r for r in rows if r.get("decoder", "") == fam]
        front = range(len(sub)) if fam == BASELINE_DECODER else pareto(np.array([r[key] for r in sub]),
                                                                        np.array([r["accuracy"] for r in sub]))
        keep += [sub[i] for i in front]
    x, y = np.array([r[key] for r in rows]), np.array([r["accuracy"] for r in rows])
    span = (float(x.max() - x.min()) or 1.0, float(y.max() - y.min()) or 1.0)
    index = {id(r): i for i, r in enumerate(rows)}
    return {id(rows[i]) for i in thinned(x, y, {index[id(r)] for r in keep}, span)}


def sweep_figure(rows: list[dict]) -> go.Figure:
    """One colour and one Pareto frontier per decoder family (rows without a ``decoder`` form one family)."""
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.06,
                        subplot_titles=("accuracy vs tokens per forward", "accuracy vs tokens/s"))
    if not rows:
        return fig.update_layout(height=360, template="unmask")
    families = list(dict.fromkeys(r.get("decoder", "") for r in rows))
    labelled = {key: labelled_rows(rows, key) for key in ("tpf", "tokens_per_s")}
    for k, fam in enumerate(families):
        sub = [r for r in rows if r.get("decoder", "") == fam]
        acc, labels = np.array([r["accuracy"] for r in sub]), [r["spec"] for r in sub]
        colour = AR_COLOUR if fam == BASELINE_DECODER else COLOURS[k % 4]
        ci = np.array([interval(r) for r in sub])                                        # (n, 2)
        bars = dict(type="data", symmetric=False, array=ci[:, 1] - acc, arrayminus=acc - ci[:, 0], thickness=1)
        for col, key in ((1, "tpf"), (2, "tokens_per_s")):
            x = np.array([r[key] for r in sub])
            front = pareto(x, acc)
            shown = {i for i, r in enumerate(sub) if id(r) in labelled[key]}
            fig.add_trace(go.Scatter(x=x, y=acc, mode="markers+text", customdata=labels, cliponaxis=False,
                                     text=[short_label(t) if i in shown else "" for i, t in enumerate(labels)],
                                     textposition="top center",
                                     textfont=dict(size=9), error_y=bars, marker=dict(size=9, color=colour),
                                     name=fam or "setting", legendgroup=fam, showlegend=len(families) > 1 and col == 1,
                                     hovertemplate="%{customdata}<br>" + key + " %{x:.2f}<br>acc %{y:.3f}"
                                                   "<extra></extra>"), 1, col)
            if fam == BASELINE_DECODER:   # the bar: its points, no frontier
                continue
            fig.add_trace(go.Scatter(x=x[front], y=acc[front], mode="lines", line=dict(color=colour, shape="hv"),
                                     name=f"{fam} Pareto frontier".strip(), legendgroup=fam, showlegend=col == 1,
                                     hoverinfo="skip"), 1, col)
    # TPF is the papers' measure (tokens per forward, NFE-based: the same on any machine); tokens/s is this
    # machine's wall clock, which moved 2x between neighbouring settings on a shared CPU
    fig.update_xaxes(title_text="TPF (tokens per forward, as the papers count)", row=1, col=1)
    fig.update_xaxes(title_text="tokens/s, wall clock here (noisy when shared)", row=1, col=2)
    fig.update_yaxes(title_text="accuracy", row=1, col=1)
    fig.update_layout(height=380, template="unmask", margin=dict(l=50, r=10, t=40, b=40))
    return fig


def sweep_table(rows: list[dict], final: bool = True) -> str:
    """The sweep's rows, each with its own problem count (a setting the budget stopped has fewer); ``final``: the
    sweep has ended (``data-final`` on it, for scripts). Wide: it scrolls sideways in its own box on a phone."""
    head = ("<tr><th>setting</th><th>n</th><th>acc [95 % CI]</th><th>NFE</th><th>TPF</th><th>tok/s</th>"
            "<th>conf ≥ 0.9</th><th>reject rate</th></tr>")
    body = "".join(f"<tr><td>{html.escape(r['spec'])}</td><td>{r['n']}{'*' if r.get('stopped_early') else ''}</td>"
                   f"<td>{stats.fmt_ci(r['accuracy'], interval(r))}</td><td>{r['nfe']:.1f}</td>"
                   f"<td>{r['tpf']:.2f}</td><td>{r['tokens_per_s']:.1f}</td>"
                   f"<td>{r.get('confident_share', float('nan')):.2f}</td>"
                   f"<td>{'–' if r.get('reject_rate') is None else format(r['reject_rate'], '.3f')}</td></tr>"
                   for r in rows)
    stopped = [r for r in rows if r.get("stopped_early")]
    note = (f"<p>* stopped early (time budget or Stop): {', '.join(html.escape(r['spec']) for r in stopped)} "
            "counts only the problems that finished before its first unfinished one.</p>" if stopped else "")
    counts = sorted({r["n"] for r in rows})
    first = rows[0] if rows else {}
    count = ("" if not rows else
             f"<p>{first['n']} problems per setting ({first.get('n_prompts', first['n'])} distinct prompts), each "
             "decoded with its own seed.</p>" if len(counts) == 1 else
             f"<p>{counts[-1]} problems per setting asked; the settings the budget stopped have fewer (n), each "
             "problem decoded with its own seed.</p>")
    return (f"<div class='um-sweep' data-final='{int(final)}'>{count}<div class='um-scroll-x'>"
            f"<table class='um-table'>{head}{body}</table></div>{note}</div>")
