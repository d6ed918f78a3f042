"""The decoded text at a step: committed tokens coloured by their commit confidence, masked slots as boxes.

How to read: green = committed with high confidence, red = committed while unsure; an outlined token was committed
at this very step; grey boxes are still masked (hover shows the current candidate and its confidence).
"""

from __future__ import annotations

from explorer.grid import Grid
from explorer.scrub import ended_line, payload, text_html


def render_text(trace, step: int | None = None, grid: Grid | None = None, selected: int | None = None) -> str:
    d = payload(trace, grid)
    s = d["n"] - 1 if step is None else min(max(int(step), 0), max(d["n"] - 1, 0))
    return text_html(d, s, selected, str((trace.meta.run_id or "example")), trace.meta.finished,
                     trace.meta.gen_end - trace.meta.prompt_len, ended_line(trace, d))
