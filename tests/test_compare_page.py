"""Compare's panel (explorer/page/compare.py): a comparison that fails says so in one line where its result goes
and clears the previous one; the checker speaks for a side only once that side has decoded to its end."""

from __future__ import annotations

import asyncio
from pathlib import Path

from engine.errors import UserError
from engine.records.trace import Trace
from explorer.page.compare import compared, view
from explorer.page.context import Page

EXAMPLES = Path(__file__).resolve().parent.parent / "assets" / "examples"


def drive(gen):
    async def go():
        return [out async for out in gen]
    return asyncio.run(go())


class Refusing:
    """A decode service that refuses a setting as the real one refuses an unknown decoder (a ``UserError`` from
    the decode, raised in the request's worker)."""
    max_seconds = 5.0

    def stream(self, prompt, decoder, params, model, **_):
        raise UserError(f"unknown decoder {decoder!r}")
        yield


def test_a_failed_comparison_is_one_line_in_its_panel_and_clears_the_previous_one():
    (html_, fig_a, fig_b), = drive(compared(Page(Refusing(), {}), "a prompt", None, "<b>x", "threshold"))
    assert html_.startswith("<p class='um-failed' role='alert'>") and html_.count("<p") == 1
    assert "unknown decoder" in html_ and "&lt;b&gt;x" in html_ and "<b>x" not in html_   # escaped
    assert fig_a is None and fig_b is None


def test_the_checker_is_silent_for_a_side_still_decoding():
    page = Page(None, {})
    page.verdict = lambda tr: "valid"                                 # a prompt the checker knows
    a, b = Trace.load(EXAMPLES / "threshold.npz"), Trace.load(EXAMPLES / "llada.npz")
    streaming = view(page, a, b, (False, False), final=False)[0]
    assert "checker" not in streaming
    one = view(page, a, b, (True, False), final=False)[0]
    assert "<td>checker</td><td>right</td><td>–</td>" in one, one
    both = view(page, a, b, (True, True))[0]
    assert "<td>checker</td><td>right</td><td>right</td>" in both
