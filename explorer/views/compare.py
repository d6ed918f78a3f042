"""A/B comparison of two decodes of the same prompt: speed and quality side by side, with the deltas.

How to read: B's figures are compared with A's; a ratio above 1 on TPF or tokens/s means B is faster. The two
mask-state maps use the same axes, so the staircases can be compared row by row.
"""

from __future__ import annotations

import html

from explorer.glossary import plain_verdict


def compare_summary(a, b, verdict_a: str | None = None, verdict_b: str | None = None, final: bool = True,
                    limit: str | None = None) -> str:
    """Both runs' NFE, TPF, speed and length side by side, and their texts. ``final``: the comparison has ended
    (``data-final`` on it, for scripts); ``limit``: the request limit that stopped it, said under the table; a
    verdict None: no checker, or that side has not ended (its answer is unfinished, not malformed)."""
    def row(label, va, vb, fmt, ratio=True):
        r = f"{vb / va:.2f}×" if ratio and va else (f"{vb - va:+.2f}" if not ratio else "–")
        return f"<tr><td>{label}</td><td>{fmt.format(va)}</td><td>{fmt.format(vb)}</td><td>{r}</td></tr>"

    ta, tb = a.meta, b.meta
    sa = ta.generated_tokens / max(ta.wall_s, 1e-9)
    sb = tb.generated_tokens / max(tb.wall_s, 1e-9)
    rows = [row("NFE", a.nfe, b.nfe, "{:d}"), row("TPF", a.tpf, b.tpf, "{:.2f}"),
            row("tokens/s", sa, sb, "{:.1f}"), row("tokens", ta.generated_tokens, tb.generated_tokens, "{:d}")]
    if verdict_a is not None or verdict_b is not None:     # a side still decoding has no verdict yet ("–")
        rows.append("<tr><td>checker</td>" + "".join(
            f"<td>{html.escape(plain_verdict(v)) if v is not None else '–'}</td>" for v in (verdict_a, verdict_b))
                    + "<td></td></tr>")
    head = (f"<tr><th></th><th>A: {html.escape(ta.decoder)}</th><th>B: {html.escape(tb.decoder)}</th>"
            f"<th>B vs A</th></tr>")
    texts = (f"<p><b>A</b>: {html.escape(ta.text)}</p><p><b>B</b>: {html.escape(tb.text)}</p>")
    note = f"<p class='um-limit'>{html.escape(limit)}</p>" if limit else ""
    return (f"<div class='um-compare' data-final='{int(final)}'><table class='um-table'>{head}{''.join(rows)}"
            f"</table>{note}{texts}</div>")
