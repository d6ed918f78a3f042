"""Each view agrees with its run and with the rest of the page: one block numbering (the text line's, from 1),
a legend that hides no data, one colour per position across a run's steps."""

from __future__ import annotations

import re
from pathlib import Path

from engine.records.trace import Trace
from explorer.views.attention import attention_mask
from explorer.views.revise import wino_counts
from explorer.views.text import render_text

EXAMPLES = Path(__file__).resolve().parent.parent / "assets" / "examples"


def test_the_attention_view_numbers_blocks_as_the_text_line_does():
    tr = Trace.load(EXAMPLES / "s2d2.npz")
    for s in range(len(tr.records)):
        title = attention_mask(tr, s).layout.title.text
        i = int(re.search(r"attention mask of step (\d+)", title)[1]) - 1     # the forward it draws
        block = re.search(r"block (\w+)\)", title)[1]
        line = re.search(r"· block (\w+) ·", render_text(tr, i))[1]
        assert block == line, (s, title, line)
        assert block == str(tr.records[i].block + 1)


def test_winos_legend_is_outside_its_bars():
    fig = wino_counts(Trace.load(EXAMPLES / "wino.npz"))
    legend = fig.layout.legend
    assert legend.y is not None and (legend.y < 0 or legend.y > 1) and legend.yanchor in ("top", "bottom"), legend


def test_a_positions_trajectory_keeps_one_colour_across_the_runs_steps():
    from explorer.views.trajectory import trajectories
    tr = Trace.load(EXAMPLES / "tspd.npz")
    seen: dict[str, set] = {}
    for s in range(len(tr.records)):
        lines = [t for t in trajectories(tr, s).data if t.name and t.name.startswith("pos ")]
        colours = [t.line.color for t in lines]
        assert len(set(colours)) == len(colours), (s, colours)         # apart at one step
        for t in lines:
            seen.setdefault(t.name, set()).add(t.line.color)
    assert len(seen) > 4 and all(len(c) == 1 for c in seen.values()), seen


def test_the_canvas_says_why_its_papers_count_is_below_its_nfe():
    from explorer.views.summary import render_summary
    tr = Trace.load(EXAMPLES / "uniform.npz")
    assert tr.nfe_paper == tr.nfe - tr.meta.nfe_by_kind["encode"] < tr.nfe
    html_ = render_summary(tr)
    assert "calls as papers count (decoder only)" in html_ and "over the prompt is counted in NFE" in html_


def test_the_revisions_tab_opens_on_a_history_not_a_placeholder():
    from explorer.views.revise import token_history
    edit = Trace.load(EXAMPLES / "edit.npz")
    fig = token_history(edit)
    first = edit.revisions()[0][1]
    assert fig.data and fig.data[0].name == f"pos {first}" and "click a token" in fig.layout.title.text
    for name in ("wino", "eb"):
        fig = token_history(Trace.load(EXAMPLES / f"{name}.npz"))
        assert fig.data and fig.data[0].name.startswith("pos "), name        # not "Select a position …"
    assert token_history(edit, selected=first + 1).layout.title.text == f"token history of position {first + 1}"
