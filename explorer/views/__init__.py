"""The torch-free views. Importing any of them registers the figures' template, "unmask": plotly_white without
automatic margins (Plotly measures every tick label and redraws to fit them, ~2.5x the cost of a redraw; the views
set their margins themselves)."""

import plotly.io as pio


def _register() -> None:
    t = pio.templates["plotly_white"].to_plotly_json()
    for axis in ("xaxis", "yaxis"):
        t["layout"].get(axis, {}).pop("automargin", None)
        t["layout"].setdefault(axis, {})["automargin"] = False
    pio.templates["unmask"] = t


_register()
