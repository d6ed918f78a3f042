"""Token ids -> display strings, from the vocabulary a trace carries (no tokenizer needed)."""

from __future__ import annotations

import html


def display(trace, tid: int) -> tuple[str, bool]:
    """(text, is_continuation): WordPiece '##7' continues the previous token and shows as '7'."""
    s = trace.token_str(int(tid))
    if s.startswith("##"):
        return s[2:], True
    return s.replace("Ġ", " ").replace("▁", " ").replace("Ċ", "\\n"), False


def label(trace, tid: int) -> str:
    return html.escape(display(trace, tid)[0])
