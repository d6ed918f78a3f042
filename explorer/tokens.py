"""Token ids -> display strings, from the vocabulary a trace carries (no tokenizer needed)."""

from __future__ import annotations


import numpy as np


def display(trace, tid: int) -> tuple[str, bool]:
    """(text, is_continuation): WordPiece '##7' continues the previous token and shows as '7'."""
    s = trace.token_str(int(tid))
    if s.startswith("##"):
        return s[2:], True
    return s.replace("Ġ", " ").replace("▁", " ").replace("Ċ", "\\n"), False


def token_labels(trace, ids: np.ndarray) -> np.ndarray:
    """Vectorised id -> display string (one lookup per distinct id)."""
    ids = np.asarray(ids)
    uniq, inv = np.unique(ids, return_inverse=True)
    names = np.array([trace.token_str(int(t)) if t >= 0 else "" for t in uniq], dtype=object)
    return names[inv].reshape(ids.shape)
