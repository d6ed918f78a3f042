"""The selected position at the current step: its top-k candidates with probabilities, and its status.

How to read: the bars are the model's five most likely tokens for this position at this forward (untempered
softmax). A tall first bar with a short second one is a confident, stable choice; two bars of similar height mean
the model has not made up its mind, which is where parallel commits go wrong.
"""

from __future__ import annotations

import html

import numpy as np

from explorer.grid import Grid


def candidates(trace, step: int | None = None, grid: Grid | None = None, selected: int | None = None) -> str:
    g = grid or Grid.of(trace)
    if selected is None or g.n_steps == 0:
        return "<div class='um-cand'>Click a token (or pick a position) to see its candidates.</div>"
    s = g.n_steps - 1 if step is None else int(np.clip(step, 0, g.n_steps - 1))
    j = int(selected) - g.P
    if not 0 <= j < g.end - g.P:
        return f"<div class='um-cand'>Position {int(selected)} is not in the generated region.</div>"
    # the latest forward at or before s that scored this position
    for t in range(s, -1, -1):
        r = trace.records[t]
        hit = np.flatnonzero(r.positions == int(selected))
        if len(hit) and r.has("topk_ids"):
            i = int(hit[0])
            ids, ps = r.field("topk_ids")[i], r.field("topk_p")[i]
            break
    else:
        return f"<div class='um-cand'>Position {int(selected)} has not been scored yet at step {s + 1}.</div>"
    cs = int(g.commit_step[j])
    status = (f"committed at step {cs + 1} as {html.escape(trace.token_str(int(g.tokens[-1][j])))!r}"
              if 0 <= cs <= s else "still masked")
    rows = "".join(f"<div class='um-cand-row'><span class='um-cand-tok'>{html.escape(trace.token_str(int(t)))}</span>"
                   f"<span class='um-cand-bar' style='width:{max(1, int(240 * float(p)))}px'></span>"
                   f"<span>{float(p):.3f}</span></div>" for t, p in zip(ids, ps))
    return (f"<div class='um-cand'><b>position {int(selected)}</b> · step {t + 1} · {status}"
            f"<div>{rows}</div></div>")
