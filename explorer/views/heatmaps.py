"""Step x position heatmaps: mask state, confidence and entropy, with block boundaries and a step cursor.

How to read: each row is one forward (step), each column a generated position (labelled with its final token;
hover a cell for the candidate and its confidence at that step). In the mask map grey = still
masked, blue = decoded earlier, orange = committed at that step. In the confidence map a cell shows the top-1
probability of the candidate at a still-masked position; the staircase of blocks runs down and to the right.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import plotly.graph_objects as go

from explorer.grid import Grid

def discrete_scale(colours: list[str]) -> list[list]:
    """A stepped colorscale: integer z in 0..n-1 (with zmin=-0.5, zmax=n-0.5) gets colours[z]."""
    n = len(colours)
    stops = []
    for i, c in enumerate(colours):
        stops += [[i / n, c], [(i + 1) / n if i == n - 1 else (i + 1) / n - 1e-6, c]]
    return stops


MISSING_CODE = 100  # "no value" for small categorical grids (0x64 stays plain in base64)


def categorical_missing_scale(colours: list[str]) -> list[list]:
    """Colorscale for codes 0..n-1 plus MISSING_CODE (transparent), with zmin=-0.5, zmax=MISSING_CODE."""
    span = MISSING_CODE + 0.5
    stops = []
    for i, c in enumerate(colours):
        stops += [[i / span, c], [(i + 1) / span - 1e-6, c]]
    return stops + [[len(colours) / span, "rgba(0,0,0,0)"], [1.0, "rgba(0,0,0,0)"]]


# a cell with nothing yet (masked, noise, stale): a see-through grey, light on the light page and dark on the dark
# one (an opaque light grey made the masked part of a map a bright block on the dark page)
MASKED = "rgba(128,128,128,0.35)"
STATE_COLOURS = discrete_scale([MASKED, "#9ecae1", "#fd8d3c"])


def vline(x, color="crimson", width=1, dash="solid", yref="paper", **kw) -> dict:
    return dict(type="line", x0=x, x1=x, y0=0, y1=1, xref="x", yref=yref,
                line=dict(color=color, width=width, dash=dash), **kw)


def hline(y, color="crimson", width=2, dash="solid", xref="paper", yref="y", **kw) -> dict:
    return dict(type="line", x0=0, x1=1, y0=y, y1=y, xref=xref, yref=yref,
                line=dict(color=color, width=width, dash=dash), **kw)


def cursor(step: int | None, axis: str = "y", edge: bool = False, **kw) -> list[dict]:
    """The step cursor at the 1-based step (the browser moves every shape named "cursor" when scrubbing); ``edge``:
    along the lower edge of the step's row instead of through it (named "cursor-edge": the browser keeps the half
    row when it moves it)."""
    if step is None:
        return []
    return [(hline if axis == "y" else vline)(step + 1 + 0.5 * edge, width=2, name="cursor-edge" if edge else
                                              "cursor", **kw)]


def selected_line(g: Grid, selected: int | None) -> dict:
    """The selected position's column; always present (hidden when none) so the browser can move it."""
    on = selected is not None and g.P <= selected < g.end
    return vline(selected - g.P if on else 0, color="crimson", name="selected", visible=on)


ROW_PX = 12   # the least height of a step's row: long runs make a tall figure that scrolls, never squashed rows


def rows_height(n_steps: int, extra: int = 130, least: int = 260) -> int:
    return max(least, min(6000, extra + ROW_PX * n_steps))


def colour_bar(title: str, colorscale: str = "Viridis", lo: float = 0, hi: float = 1) -> dict:
    """An invisible trace that only draws a labelled colour bar (the heatmaps' own scales are quantised and
    include a transparent "no value" band, which a bar should not show)."""
    return dict(type="scatter", x=[None], y=[None], mode="markers", showlegend=False, hoverinfo="skip",
                marker=dict(colorscale=colorscale, cmin=lo, cmax=hi, color=[lo], showscale=True,
                            colorbar=dict(title=dict(text=title, side="right"), thickness=12, len=0.8)))


NO_VALUE = 200  # not 255: plotly's to_json escapes "/" as \u002f, and 0xFF bytes are all "/" in base64


def quantize(z: np.ndarray) -> np.ndarray:
    """Probabilities -> uint8 percent (NO_VALUE = none): a quarter of float32's bytes on the wire."""
    q = np.full(z.shape, NO_VALUE, np.uint8)
    ok = ~np.isnan(z)
    q[ok] = np.rint(np.clip(z[ok], 0, 1) * 100).astype(np.uint8)
    return q


def percent_scale(name: str = "Viridis", background: str = "rgba(0,0,0,0)") -> list[list]:
    """Colorscale for quantize()d values with zmin=0, zmax=NO_VALUE: 0..100 on `name`, NO_VALUE transparent."""
    from plotly.colors import get_colorscale, sample_colorscale
    cols = sample_colorscale(get_colorscale(name), [i / 10 for i in range(11)])
    top = 100 / NO_VALUE
    return [[top * i / 10, c] for i, c in enumerate(cols)] + [[top + 1e-6, background], [1.0, background]]


def figure(data: list[dict], layout: dict) -> go.Figure:
    """A figure from plain dicts, without plotly's per-property validation (~10 ms a figure; these are rebuilt
    on every scrub). The template is inlined because an unvalidated template name would not be resolved."""
    return go.Figure(data=data, layout={"template": _template(), **layout}, _validate=False)


@lru_cache(maxsize=1)
def _template() -> dict:
    import plotly.io as pio
    return pio.templates["unmask"].to_plotly_json()


def empty_figure(text: str, height: int = 240) -> go.Figure:
    """A figure that only says why it has nothing to show."""
    fig = go.Figure()
    fig.add_annotation(text=text, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    return fig.update_layout(height=height, template="unmask", xaxis=dict(visible=False), yaxis=dict(visible=False))


def step_position_figure(data: list[dict], g: Grid, step: int | None, title: str, selected: int | None = None,
                         **layout) -> go.Figure:
    """Common frame of the step x position maps: categorical position axis, block boundaries, step cursor."""
    # x is categorical (one "position token" label per column); shapes address columns by index. Rows keep at least
    # 7 px (long generations make a tall, scrollable figure, not squashed rows); plotly's zoom handles wide ones
    shapes = [vline(e - 0.5, color="#444", dash="dot") for e in g.block_edges()]
    # the step line runs along the lower edge of the step's row, not through its cells (a red line over a red
    # "rejected" cell hid the cell the tour asks to find)
    shapes += cursor(step, edge=True) + [selected_line(g, selected)]
    base = dict(shapes=shapes, title=dict(text=title, x=0.01, font=dict(size=14)),
                height=rows_height(g.n_steps), margin=dict(l=50, r=10, t=36, b=90),
                xaxis=dict(type="category", nticks=min(40, len(g.labels)), tickangle=-60, title=dict(text="position"),
                           categoryorder="array", categoryarray=list(g.labels), range=[-0.5, len(g.labels) - 0.5]),
                yaxis=dict(title=dict(text="step"), autorange=False, range=[g.n_steps + 0.5, 0.5]))
    for key, val in layout.items():
        base[key] = {**base[key], **val} if isinstance(val, dict) and isinstance(base.get(key), dict) else val
    return figure(data, base)


REVISION_NAMES = {1: "edited", 2: "re-masked", 3: "WINO re-masked"}


def revision_marks(trace, g: Grid) -> list[dict]:
    """A mark on every cell whose written token a revising decoder changed, old → new in the hover."""
    if not g.revisions:
        return []
    s, j, code, old, new = (np.array(c) for c in zip(*g.revisions))
    show = lambda t: np.array(["[MASK]" if t_ == trace.meta.mask_token_id else trace.token_str(int(t_))  # noqa
                               for t_ in t], dtype=object)
    text = [f"{REVISION_NAMES.get(int(c), '?')}: {a} → {b}" for c, a, b in zip(code, show(old), show(new))]
    return [dict(type="scatter", x=g.labels[j], y=s + 1, mode="markers", name="revised", text=text,
                 marker=dict(symbol="diamond", size=11, color="#7a0177", line=dict(width=1.5, color="white")),
                 hovertemplate="pos %{x} · step %{y}<br>%{text}<extra></extra>")]


def mask_state(trace, step: int | None = None, grid: Grid | None = None, selected: int | None = None) -> go.Figure:
    g = grid or Grid.of(trace)
    data = [dict(type="heatmap", z=g.state, x=g.labels, y=np.arange(1, g.n_steps + 1), zmin=-0.5, zmax=2.5,
                 colorscale=STATE_COLOURS, showscale=False, text=g.hover,
                 hovertemplate="pos %{x} · step %{y}<br>%{text}<extra></extra>")]
    data += [dict(type="scatter", x=[None], y=[None], mode="markers", name=name, showlegend=True,
                  marker=dict(symbol="square", size=10, color=colour))
             for name, colour in (("masked", MASKED), ("decoded", "#9ecae1"), ("committed now", "#fd8d3c"))]
    data += revision_marks(trace, g)
    return step_position_figure(data, g, step, "mask state", selected,
                                legend=dict(orientation="v", x=1.01, xanchor="left", y=1, yanchor="top"),
                                margin=dict(r=130))


# the × of a committed cell: a dark cross with a white rim. A committed cell is often empty (a verify or commit
# forward has no masked confidence to show), so the × lies on the page itself: a white × vanished on the light page
# (1:1) and on the yellow of a sure cell (1.1:1); dark on light and yellow, its rim on dark blue and the dark page
COMMITTED_X = dict(symbol="x", size=8, color="#1a1a1a", line=dict(width=1, color="white"))


def committed_marks(g: Grid) -> list[dict]:
    """A × on every committed cell of a step × position map (none when nothing was committed)."""
    cells = np.argwhere(g.committed)
    if not len(cells):
        return []
    return [dict(type="scatter", x=g.labels[cells[:, 1]], y=cells[:, 0] + 1, mode="markers", hoverinfo="skip",
                 marker=COMMITTED_X, showlegend=False)]


def confidence(trace, step: int | None = None, grid: Grid | None = None, selected: int | None = None,
               field: str = "confidence") -> go.Figure:
    g = grid or Grid.of(trace)
    z = quantize(getattr(g, field))
    data = [dict(type="heatmap", z=z, x=g.labels, y=np.arange(1, g.n_steps + 1), zmin=0, zmax=NO_VALUE,
                 colorscale=percent_scale(), showscale=False,
                 # one byte a cell on the wire leaves no "no value" for the hover to test: it says what 200 means
                 hovertemplate=f"pos %{{x}} · step %{{y}}<br>{field} %{{z}} in percent ({NO_VALUE}: not masked at "
                               "this step, no value)<extra></extra>")]
    # the candidate behind each cell is in the mask map's hover: sending the same 65 k strings again per map
    # tripled a long run's payload
    data += committed_marks(g)
    label = "confidence (top-1 p of masked positions; × = committed)" if field == "confidence" else \
        "normalised entropy of masked positions"
    data.append(colour_bar("p (top-1)" if field == "confidence" else "entropy / ln V"))
    return step_position_figure(data, g, step, label, selected, margin=dict(r=80))
