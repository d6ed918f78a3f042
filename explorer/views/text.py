"""The decoded text at a step: committed tokens coloured by their commit confidence, masked slots as boxes.

How to read: green = committed with high confidence, red = committed while unsure; an outlined token was committed
at this very step; grey boxes are still masked (hover shows the current candidate and its confidence).
"""

from __future__ import annotations

import html

import numpy as np

from explorer.grid import MASKED, NEW, Grid
from explorer.tokens import display


def conf_colour(c: float) -> str:
    if np.isnan(c):
        return "#e8e8e8"
    return f"hsl({int(120 * float(c))}, 70%, 82%)"


def render_text(trace, step: int | None = None, grid: Grid | None = None, selected: int | None = None) -> str:
    g = grid or Grid.of(trace)
    if g.n_steps == 0:
        return "<div class='um-text'>(no steps)</div>"
    s = g.n_steps - 1 if step is None else int(np.clip(step, 0, g.n_steps - 1))
    toks, state, cand, conf = g.tokens[s], g.state[s], g.candidate[s], g.confidence[s]
    cconf = g.commit_confidence
    chips = []
    for j, pos in enumerate(g.positions):
        cls = ["um-tok"]
        if state[j] == MASKED:
            cls.append("um-mask")
            hint = (f"candidate {display(trace, cand[j])[0]!r} p={conf[j]:.2f}" if cand[j] >= 0 else "masked")
            text, cont, bg = "\u25a2", False, "#f3f3f3"
        else:
            text, cont = display(trace, toks[j])
            bg = conf_colour(cconf[j])
            hint = f"committed at step {g.commit_step[j]}, p={cconf[j]:.2f}"
            if state[j] == NEW:
                cls.append("um-new")
        if cont:
            cls.append("um-cont")
        if selected is not None and pos == selected:
            cls.append("um-sel")
        chips.append(f"<span class='{' '.join(cls)}' data-pos='{pos}' style='background:{bg}' "
                     f"title='pos {pos}: {html.escape(hint)}'>{html.escape(text)}</span>")
    prompt = html.escape(trace.meta.get("prompt", ""))
    # which run this is and whether it has ended: what tests (and scripts) wait for, never for time
    run = html.escape(str(trace.meta.get("run_id", "example")))
    done = "1" if trace.meta.get("finished", True) else "0"
    return (f"<div class='um-text' data-run='{run}' data-finished='{done}'><div class='um-step'>step {s + 1} / {g.n_steps} · block "
            f"{trace.records[s].block} · {trace.records[s].kind}</div>"
            f"<span class='um-prompt'>{prompt}</span> {''.join(chips)}</div>")
