"""Two futures of one decode: the run shown and a branch of it (``engine.runtime.branch``), from the same step.

How to read: both texts, with the tokens where the branch ended up different marked; both mask-state maps on one
step axis, their shared prefix (the steps up to the branch point, which the branch did not run again) shaded
grey. The branch's forwards count the shared ones plus its own; its one rebuild forward (the cache of the prompt
and the finished blocks) is counted apart. A token forced by hand is a commit of reason "forced by hand".
"""

from __future__ import annotations

import html

from engine.records.trace import Trace
from explorer.glossary import plain_verdict
from explorer.grid import Grid
from explorer.views import heatmaps


def joined(base, branch) -> Trace:
    """The branch as one decode from the start: the base's first ``step`` records, then the branch's own (its
    rebuild forward, which writes nothing, left out)."""
    s = branch.meta.branch["step"]
    return Trace(meta=branch.meta, records=list(base.records[:s]) + [r for r in branch.records if r.kind != "resume"])


def forwards(base, branch) -> int:
    """The branch's forwards as one decode would count them: the shared ones, then its own (rebuild excluded)."""
    s = branch.meta.branch["step"]
    shared = base.records[s - 1].nfe if s else 0
    return shared + branch.nfe - branch.meta.branch["nfe_resume"]


def marked_text(trace, other) -> str:
    """The answer's tokens (up to its stop token), each one that differs from ``other``'s at the same slot
    marked."""
    m, theirs = trace.meta, other.meta.final_tokens
    out = []
    for i, t in enumerate(m.token_ids):
        p = m.prompt_len + i
        word = html.escape(m.vocab.get(str(t), "?"))
        differs = p >= len(theirs) or theirs[p] != t
        out.append(f"<mark class='um-diff' title='the other future has another token here'>{word}</mark>"
                   if differs else word)
    return " ".join(out)


def branch_summary(base, branch, verdict_a: str | None = None, verdict_b: str | None = None) -> str:
    b = branch.meta.branch
    change = []
    if b.get("force"):
        pos, tok = b["force"]
        change.append(f"forced “{html.escape(branch.meta.vocab.get(str(tok), str(tok)))}” at position {pos}")
    if b.get("spec"):
        change.append(f"decoder from here: {html.escape(b['spec'])}")
    head = (f"<p class='um-branch-head'>Branched after step {b['step']} of {len(base.records)}: "
            f"{'; '.join(change) or 'the same decoder, nothing forced'}. "
            f"{html.escape(b.get('fresh', '').capitalize())}.</p>")
    rows = [("decoder", html.escape(base.meta.decoder), html.escape(branch.meta.decoder)),
            ("NFE", str(base.nfe), f"{forwards(base, branch)} (+{b['nfe_resume']} rebuild)"),
            ("tokens", str(base.meta.generated_tokens), str(branch.meta.generated_tokens))]
    if verdict_a is not None and verdict_b is not None:
        rows.append(("checker", html.escape(plain_verdict(verdict_a)), html.escape(plain_verdict(verdict_b))))
    table = "".join(f"<tr><td>{k}</td><td>{a}</td><td>{c}</td></tr>" for k, a, c in rows)
    return (f"{head}<table class='um-table'><tr><th></th><th>this run</th><th>the branch</th></tr>{table}</table>"
            f"<p><b>this run</b>: {marked_text(base, branch)}</p><p><b>the branch</b>: {marked_text(branch, base)}</p>")


def branch_maps(base, branch):
    """Both mask-state maps on one step axis and one x range, the shared prefix shaded."""
    full = joined(base, branch)
    n, s = max(len(base.records), len(full.records)), branch.meta.branch["step"]
    grids = [Grid.of(t) for t in (base, full)]
    cols = max(len(g.labels) for g in grids)
    figs = []
    for t, g, title in ((base, grids[0], "this run"), (full, grids[1], "the branch")):
        fig = heatmaps.mask_state(t, None, g).update_layout(
            title=dict(text=title, font=dict(size=12)), height=heatmaps.rows_height(n) + 60,
            yaxis=dict(range=[n + 0.5, 0.5]), xaxis=dict(range=[-0.5, cols - 0.5], nticks=min(24, cols),
                                                          tickfont=dict(size=9)),
            legend=dict(orientation="h", x=0, y=-0.5, yanchor="top"), margin=dict(r=10, b=120))
        if s:
            fig.add_shape(type="rect", xref="paper", x0=0, x1=1, y0=0.5, y1=s + 0.5, line_width=0,
                          fillcolor="rgba(120,120,120,0.25)", name="shared prefix", layer="above")
            fig.add_annotation(xref="paper", x=1, y=s + 0.5, text=f"branch point: after step {s}", showarrow=False,
                               xanchor="right", yanchor="bottom", font=dict(size=10),
                               bgcolor="rgba(255,255,255,0.8)")
        figs.append(fig)
    return tuple(figs)
