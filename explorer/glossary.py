"""The glossary tab and the "how to read this" notes under each view."""

from __future__ import annotations

import html
import inspect
import re

from engine.catalogue.cards import cards

GLOSSARY = r"""
| term | meaning |
|---|---|
| **mask** | the `[MASK]` token: a position whose token is not decided yet |
| **block** | B consecutive positions on the absolute grid (pos // B); blocks are decoded left to right, each attending only to earlier blocks (block-causal), so finished blocks are cached exactly |
| **step** | one denoising forward of the current block; every forward counts in **NFE** |
| **commit** | writing a token into a masked position for good |
| **confidence** | top-1 probability of a position's candidate; **margin** = top-1 − top-2; **entropy** normalised by ln V |
| **TPF** | tokens per forward = generated tokens / NFE; autoregressive decoding has TPF = 1 |
| **trajectory** | a position's confidence, entropy and candidate over the steps of its block |
| **revise** | a decoder that changes its mind rewrites a token it wrote in the current block, or returns it to `[MASK]`; finished blocks stay final, so the block cache stays exact |
| **prefix / dual cache** | Fast-dLLM's approximate caches for full-attention models: a block's first forward keeps the canvas's K/V; later forwards recompute the block and what follows it (prefix) or the block alone (dual) and read the rest **stale**; the **drift** is the max \|Δ logit\| against an uncached forward |
| **\|C_t\|** | the number of tokens committed at step t (the commit set C_t) |
| **word piece (##)** | a token that continues the previous one (WordPiece's "##4" after "1" reads "14"); the text view joins them |
"""

GLOSSARY += "".join(f"| **{term}** | {meaning} |\n" for c in cards().values() for term, meaning in c.glossary)


def how_to_read(module) -> str:
    """The "How to read" paragraph of a view module's docstring."""
    doc = inspect.getdoc(module) or ""
    for para in doc.split("\n\n"):
        if para.startswith("How to read"):
            return " ".join(para.split())
    return ""


def inline_markdown(text: str) -> str:
    """**bold**, *italic* and `code` of our own texts as HTML, everything else escaped."""
    out = html.escape(text, quote=False)
    out = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)
    out = re.sub(r"`(.+?)`", r"<code>\1</code>", out)
    return re.sub(r"\*(.+?)\*", r"<i>\1</i>", out)


# the task checkers' verdicts (engine/tasks) in plain words for the page; the checker's own word goes in the hover
VERDICT_WORDS = {
    "valid": "right", "wrong": "wrong", "wrong answer": "wrong answer", "no answer": "no answer found",
    "malformed": "not in the task's form", "unknown word": "a word the task does not have",
    "inconsistent name": "the name changes", "inconsistent": "contradicts itself",
    "same place": "home and away are one place", "away not after home": "the places break the story's order rule",
    "ignores prompt": "ignores the prompt", "ignores givens": "ignores the given numbers",
    "wrong count": "wrong number of items", "wrong category": "an item of the wrong kind",
    "duplicate": "repeats an item", "out of order": "out of order", "missing words": "leaves out the prompt's words",
    "ungrammatical": "not grammatical",
}


def plain_verdict(verdict: str) -> str:
    """A checker's verdict as the page says it (an unlisted one as the checker wrote it)."""
    return VERDICT_WORDS.get(verdict, verdict)
