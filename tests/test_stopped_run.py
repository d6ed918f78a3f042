"""A run the visitor stops (or a limit stops) says so and stays scrubbable: Stop cancels the run's request, then
the partial run it last showed becomes the run shown, with "stopped at step N" and the slots it left undecided
in the text, the slider's data over the steps decoded, the checker silent; the next run decodes again rather than
serve the cached finished copy (``explorer.page.run.show_stopped``, ``explorer.page.decode_tab.Live``)."""

from __future__ import annotations

import asyncio
import copy
import json
import re
import threading
import time
from pathlib import Path

import gradio as gr
import pytest

from engine.records.trace import Trace
from explorer import scrub
from explorer.page import decode_tab
from explorer.page.context import Page
from explorer.page.run import RunParts, show_stopped

EXAMPLE = Path(__file__).resolve().parent.parent / "assets" / "examples" / "llada.npz"


def upto(full: Trace, k: int) -> Trace:
    """The run after its first k forwards, as the engine streams it (a snapshot of its own)."""
    return Trace(copy.deepcopy(full.meta), full.records[:k])


class Slow:
    """A decode service streaming a pre-baked run a forward every 100 ms, counting the decodes it starts."""
    max_seconds = 30.0

    def __init__(self, full: Trace):
        self.full, self.decodes = full, 0

    def stream(self, prompt, decoder, params, model, should_stop=None, **_):
        self.decodes += 1
        for k in range(1, len(self.full.records) + 1):
            if should_stop is not None and should_stop():
                return
            time.sleep(0.1)
            yield upto(self.full, k)

    def model_id(self, model):
        return "m"

    def check_prompt(self, prompt):
        return prompt


class Store:
    """A trace cache holding the finished run."""
    def __init__(self, tr):
        self.tr = tr

    def get(self, key):
        return copy.deepcopy(self.tr)

    def put(self, key, tr):
        pass


@pytest.fixture
def parts():
    full = Trace.load(EXAMPLE)
    with gr.Blocks():
        v = decode_tab.build_view_tabs(gr.HTML(), gr.HTML(), gr.HTML())
        rp = RunParts(v, None, gr.File(), gr.State(), gr.State())
    page = Page(Slow(full), {}, example_traces={"llada": full})   # its prompt is the page's own: cached for all
    return full, page, rp


async def stop_after(page, rp, box, frames: int) -> tuple[dict, list]:
    """Decode, cancel the request after ``frames`` frames (as gradio's Stop does), then Stop's handler."""
    seen = []

    async def run():
        async for tr, _ in decode_tab.decode(page, rp.views, page.example_traces["llada"].meta.prompt, None,
                                             "llada", {}, None, box, None):
            seen.append(tr)

    task = asyncio.create_task(run())
    while len(seen) < frames:
        await asyncio.sleep(0.005)
    task.cancel()
    out = await show_stopped(page, rp, box, None)
    with pytest.raises(asyncio.CancelledError):
        await task
    return out, seen


def test_a_stopped_run_says_where_it_stopped_and_scrubs_what_it_decoded(parts):
    full, page, rp = parts
    box = {"tab": "Decode"}
    out, seen = asyncio.run(stop_after(page, rp, box, 3))
    tr = out[rp.trace]
    n = len(tr.records)
    assert 3 <= n < len(full.records) and tr.meta.finished and tr.meta.limit == scrub.STOPPED
    assert tr is seen[-1] or n == len(seen[-1].records)          # the last frame shown, not a later one
    text = out[rp.views.text]
    assert "data-finished='1'" in text and f"step {n} / {n}" in text
    left = re.search(r"Stopped at step (\d+), when you pressed Stop: (\d+) of (\d+) slots were still to decide",
                     text)
    assert left and int(left[1]) == n and 0 < int(left[2]) <= int(left[3]), text
    data = json.loads(re.search(r"data-json='([^']*)'", out[rp.views.run_data])[1].replace("&quot;", '"')
                      .replace("&#x27;", "'").replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))
    assert data["n"] == n and data["ended"].startswith(f"Stopped at step {n},")      # the slider's data
    assert "checker" not in out[rp.views.summary].lower()
    assert "decoding…" not in text
    assert box.get("fresh") and "live" not in box and "partial" not in box


def test_stop_without_a_streaming_run_changes_nothing(parts):
    full, page, rp = parts
    assert asyncio.run(show_stopped(page, rp, {"tab": "Decode"}, None)) == {rp.trace: gr.skip()}


def test_after_a_stop_the_next_run_decodes_again_and_the_one_after_is_cached(parts):
    full, page, rp = parts
    page.store = Store(full)
    box = {"tab": "Decode", "fresh": True}               # what Stop leaves

    async def run():
        last = None
        async for tr, _ in decode_tab.decode(page, rp.views, full.meta.prompt, None, "llada", {}, None, box, None):
            last = tr
        return last

    tr = asyncio.run(run())
    assert page.service.decodes == 1 and not tr.meta.cached and "fresh" not in box
    tr = asyncio.run(run())
    assert page.service.decodes == 1 and tr.meta.cached


def test_a_run_ended_by_a_limit_says_so_in_its_text(parts):
    full, page, rp = parts
    tr = upto(full, 4)
    tr.meta.finished, tr.meta.limit = True, "stopped after 30.0 s, to end within the time budget"
    html = decode_tab.finished(page, rp.views, tr, None, None)[rp.views.text]
    assert "Stopped at step 4, by a limit (stopped after 30.0 s" in html and "Run decodes" not in html


def test_a_stop_as_the_run_ends_on_its_own_shows_the_finished_run_not_its_last_frame(parts, monkeypatch):
    """Stop pressed while a run that decoded to its end is being drawn (seconds on a loaded machine): gradio
    cancels that drawing, so Stop's handler draws the finished run (its end, not "stopped"); it used to draw
    nothing, leaving the page on its last streamed frame with the browser's words of a stop, never settled."""
    full, page, rp = parts
    drawing, draw = threading.Event(), decode_tab.finished

    def slow(*args, **kw):              # the final drawing of a loaded machine
        drawing.set()
        time.sleep(0.5)
        return draw(*args, **kw)
    monkeypatch.setattr(decode_tab, "finished", slow)
    box = {"tab": "Decode"}

    async def main():
        async def run():
            async for _ in decode_tab.decode(page, rp.views, full.meta.prompt, None, "llada", {}, None, box, None):
                pass
        task = asyncio.create_task(run())
        while not drawing.is_set():
            await asyncio.sleep(0.005)
        task.cancel()
        return await show_stopped(page, rp, box, None)

    out = asyncio.run(main())
    tr = out[rp.trace]
    n = len(full.records)
    assert len(tr.records) == n and tr.meta.finished and tr.meta.limit != scrub.STOPPED
    assert f"step {n} / {n}" in out[rp.views.text] and "Stopped at step" not in out[rp.views.text]
    assert "partial" not in box and "fresh" not in box
