"""Per-token confidence trajectories with the Kalman forecast fan (TSPD + CE, PROPOSED reconstruction).

How to read: each line is one position's top-1 confidence while it was masked, step by step. At the chosen step
the fan shows CE's forecast of that position's confidence over the next forwards: the dotted mean and the shaded
90 % band (± 1.64σ, σ the Kalman filter's forecast spread), mapped back from logits to probabilities. The triangle
is the LCB (lower confidence bound ẑ − κσ, with the run's κ) at the position's horizon h; the dashed line is τ:
CE commits early when that triangle clears it. With κ = 0 the triangle sits on the mean. At a finished run's last
step (where the page opens it, its block all but committed) and at a step with nothing forecast the view shows the
step whose four widest forecast bands (in probability, at the horizon) are widest together, on those four positions,
so the fan is visible; its title then names that step and the slider's. Scrubbing to a step with a forecast shows
that step. The views line's link to TSPD + CE opens the run at that step, so the slider and the title agree.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.colors import qualitative

from engine.decoders.tspd.card import TSPDDraftFields
from engine.records.trace import fields
from explorer.grid import Grid
from explorer.views.heatmaps import cursor, hline


def _sigmoid(z):
    return 1 / (1 + np.exp(-np.asarray(z, dtype=float)))


def default_positions(trace, g: Grid, step: int | None, k: int = 4) -> list[int]:
    """The k positions of the current block that stayed masked longest (the interesting ones)."""
    s = g.n_steps - 1 if step is None else step
    r = trace.records[s]
    cols = [int(p) - g.P for p in r.positions if g.P <= p < g.end]
    masked_steps = sorted(cols, key=lambda j: -np.sum(~np.isnan(g.confidence[:, j])))
    return [g.P + j for j in masked_steps[:k]]


def forecast_rows(rec) -> np.ndarray:
    """Rows of a record whose positions CE forecast (still masked, with a horizon)."""
    f = fields(rec, TSPDDraftFields)
    if f is None or f.forecast_mean is None:
        return np.zeros(0, dtype=int)
    return np.flatnonzero((np.asarray(f.horizon) >= 1) & ~np.isnan(np.asarray(f.forecast_mean)).any(axis=1))


def band(f, i: int) -> float:
    """The width, in probability, of row i's 90 % forecast band at its horizon: how much of its fan shows (a
    forecast saturated near p = 1 draws a band too thin to see)."""
    h = int(f.horizon[i])
    mean, std = float(f.forecast_mean[i][h - 1]), float(f.forecast_std[i][h - 1])
    return float(_sigmoid(mean + BAND_Z * std) - _sigmoid(mean - BAND_Z * std))


def telling(trace, k: int = 4) -> tuple[int, list[int]] | None:
    """Where the fan shows: the step whose k widest forecast bands (in probability, at the horizon) are widest
    together, the earliest of equals, and there those k positions. None when no step has a forecast."""
    best, at = 0.0, None
    for s, rec in enumerate(trace.records):
        rows = forecast_rows(rec)
        if not len(rows):
            continue
        f = fields(rec, TSPDDraftFields)
        widest = sorted(rows, key=lambda i: -band(f, i))[:k]
        width = sum(band(f, i) for i in widest)
        if at is None or width > best:
            best, at = width, (s, sorted(int(rec.positions[i]) for i in widest))
    return at


def trajectories(trace, step: int | None = None, grid: Grid | None = None, selected: int | None = None) -> go.Figure:
    """The selected position's trajectory (else a few of the current block's, the least confident first), drawn
    up to the chosen step, with that step's forecast. A finished run's last step (where the page opens it: its
    block all but committed, the lines stacked at 1.0) and a step with nothing forecast show the step ``telling``
    picks instead, and say so: scrubbing to another step moves it."""
    g = grid or Grid.of(trace)
    s = g.n_steps - 1 if step is None else int(step)
    positions = [selected] if selected is not None else default_positions(trace, g, s)
    moved = ""
    ends = trace.meta.finished and s == g.n_steps - 1     # where a finished run opens (all but done)
    if selected is None and g.n_steps and (ends or not len(forecast_rows(trace.records[s]))):
        tell = telling(trace)
        if tell is not None and tell[0] != s:    # the title names both steps: the one shown and the slider's
            moved = f" · step {tell[0] + 1}, its widest fan; the slider's step {s + 1} has none to show"
            s, positions = tell
    fig = go.Figure()
    colours = position_colours(trace, g)
    tau = float(trace.meta.params.get("tau", 0.9))
    drawn = 0
    for n, pos in enumerate(positions):
        j = pos - g.P
        if not 0 <= j < g.end - g.P:
            continue
        y = g.confidence[: s + 1, j]
        steps = np.flatnonzero(~np.isnan(y))
        if not len(steps):
            continue
        drawn += 1
        colour = colours.get(pos, PALETTE[n % len(PALETTE)])
        fig.add_trace(go.Scatter(x=steps + 1, y=y[steps], mode="lines+markers", name=f"pos {pos}",
                                 line=dict(color=colour),
                                 text=[trace.token_str(int(c)) for c in g.candidate[steps, j]],
                                 hovertemplate="step %{x}: %{y:.3f} (%{text})<extra>pos " + str(pos) + "</extra>"))
        add_fan(fig, trace.records[s], pos, s, y[s], colour)
    if not drawn:
        which = f"position {selected}" if selected is not None else "the positions of this step's block"
        fig.add_annotation(text=f"No trajectory yet: {which} had not been scored while masked by step {s + 1}.",
                           showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_layout(shapes=[hline(tau, color="#444", dash="dash", width=1)] + cursor(s, axis="x"), height=360,
                      template="unmask", margin=dict(l=50, r=10, t=36, b=44),
                      yaxis=dict(range=[0, 1.02], title="confidence"),
                      xaxis=dict(title=dict(text="step", standoff=6)),
                      title=dict(text="confidence trajectories and CE forecast fan (PROPOSED)" + moved, x=0.01,
                                 font=dict(size=14)))
    return fig


BAND_Z = 1.645       # the fan: a two-sided 90 % band of the forecast
# the first colours are Plotly's own; a block's positions may need more (every two shown at one step differ)
PALETTE = list(dict.fromkeys(["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]
                             + [c.lower() for c in qualitative.Dark24 + qualitative.Light24]))


def position_colours(trace, g: Grid) -> dict[int, str]:
    """One colour per position for the whole run, so a line keeps its colour as the slider moves (by its rank at
    each step, pos 26 was blue and pos 18 orange at step 3, and the other way round at step 12): the positions any
    step shows by default (and the fan's step) are coloured in order of first showing, each with the first colour
    no position ever shown beside it has. Memoized on the run's grid."""
    if "traj_colours" in g.memo:
        return g.memo["traj_colours"]
    shown = [default_positions(trace, g, s) for s in range(g.n_steps)]
    tell = telling(trace)
    shown += [tell[1]] if tell is not None else []
    beside: dict[int, set[int]] = {}
    for group in shown:
        for p in group:
            beside.setdefault(p, set()).update(q for q in group if q != p)
    out: dict[int, str] = {}
    for p in beside:                               # dicts keep the order of first showing
        taken = {out[q] for q in beside[p] if q in out}
        out[p] = next((c for c in PALETTE if c not in taken), PALETTE[len(out) % len(PALETTE)])
    g.memo["traj_colours"] = out
    return out


def add_fan(fig: go.Figure, rec, pos: int, s: int, y_now: float, colour: str) -> None:
    """CE's forecast made at step s (0-based) for one position: the band ± κσ, the mean and the LCB at h."""
    f = fields(rec, TSPDDraftFields)
    if f is None or f.forecast_mean is None or pos not in rec.positions:
        return
    i = int(np.flatnonzero(rec.positions == pos)[0])
    mean, std = f.forecast_mean[i], f.forecast_std[i]
    if np.isnan(mean).any():
        return
    kappa = float(f.kappa if f.kappa is not None else 1.64)
    hs = s + 1 + np.arange(1, len(mean) + 1)
    start = y_now if not np.isnan(y_now) else _sigmoid(mean[0])
    # the band is the forecast's own 90 % spread, whatever κ the rule uses (with κ = 0 a ± κσ band would vanish);
    # it opens from the confidence now
    fig.add_trace(go.Scatter(x=np.r_[s + 1, hs, hs[::-1], s + 1],
                             y=np.r_[start, _sigmoid(mean + BAND_Z * std), _sigmoid(mean - BAND_Z * std)[::-1], start],
                             fill="toself", fillcolor=colour, opacity=0.18, line=dict(width=0),
                             hoverinfo="skip", showlegend=False))
    fig.add_trace(go.Scatter(x=np.r_[s + 1, hs], y=np.r_[start, _sigmoid(mean)], mode="lines",
                             line=dict(color=colour, dash="dot"), showlegend=False,
                             hovertemplate="forecast step %{x}: %{y:.3f}<extra></extra>"))
    h = int(f.horizon[i])
    if h >= 1:
        fig.add_trace(go.Scatter(x=[s + 1 + h], y=[_sigmoid(mean[h - 1] - kappa * std[h - 1])], mode="markers",
                                 marker=dict(symbol="triangle-up", size=10, color=colour),
                                 name=f"LCB @ horizon {h}", showlegend=False,
                                 hovertemplate="LCB at horizon %{x}: %{y:.3f}<extra></extra>"))
