"""A page Run's drawing inside the fair share and the budget (issue 74, point 4): the time its figures take is
charged to its client in the ledger its engine time goes to, its last drawing ends within the request's budget
(cut, with the views drawn so far and a one-line note), and drawing runs off the event loop, so a bystander is
answered while many Runs draw. In process: a pre-baked run streamed by a fake service, the page's real drawing."""

from __future__ import annotations

import asyncio
import gc
import time
from pathlib import Path

import gradio as gr
import pytest

from engine.records.trace import Trace
from explorer.page import decode_tab, startup, worker
from explorer.page.context import Page
from explorer.page.fair import FairGate
from explorer.page.run import RunParts
from explorer.registry import in_tab
from tests.clocks import own_clock
from tests.test_body_check import answer, timed_get
from tests.test_fair import visitor
from tests.test_stopped_run import upto

EXAMPLE = Path(__file__).resolve().parent.parent / "assets" / "examples" / "llada.npz"


class Quick:
    """A decode service streaming the first forwards of a pre-baked run, ``pause_s`` apart (no model)."""
    max_seconds = 30.0

    def __init__(self, full: Trace, forwards: int = 4, pause_s: float = 0.01):
        self.full, self.forwards, self.pause_s = full, forwards, pause_s

    def stream(self, prompt, decoder, params, model, should_stop=None, **_):
        for k in range(1, self.forwards + 1):
            if should_stop is not None and should_stop():
                return
            time.sleep(self.pause_s)
            yield upto(self.full, k)


@pytest.fixture(scope="module")
def parts():
    full = Trace.load(EXAMPLE)
    with gr.Blocks():
        v = decode_tab.build_view_tabs(gr.HTML(), gr.HTML(), gr.HTML())
        rp = RunParts(v, None, gr.File(), gr.State(), gr.State())
    return full, rp


async def page_run(page, rp, box, **kw) -> list[dict]:
    """One page Run through ``decode``: every part it sent."""
    return [p async for _, p in decode_tab.decode(page, rp.views, "a prompt", None, "llada", {}, None, box, None,
                                                    **kw)]


def drawing_timed(monkeypatch, view_s: float = 0.0) -> list[float]:
    """Time every view and panel the page draws (each view made ``view_s`` slower): the seconds, one per drawing."""
    took = []
    for name in ("render_views", "render_panels"):
        real = getattr(decode_tab, name)

        def timed(*a, _real=real, _extra=view_s if name == "render_views" else 0.0, **k):
            t0 = time.perf_counter()
            time.sleep(_extra)
            out = _real(*a, **k)
            took.append(time.perf_counter() - t0)
            return out
        monkeypatch.setattr(decode_tab, name, timed)
    return took


def test_a_page_runs_drawing_is_charged_to_its_client(parts, monkeypatch):
    """Its pool, client and session each accrue at least the time its frames and its last drawing took (the fake
    service's forwards are charged nothing: they are not engine rounds). Before, the ledger saw none of it."""
    full, rp = parts
    took = drawing_timed(monkeypatch)
    gate = FairGate(concurrent=1)
    page = Page(Quick(full, pause_s=0.3), {}, gate=gate)
    path = ("10.0.1.0/24", "10.0.1.1", "s")

    async def run():
        async with gate.slot("run", visitor("s", "10.0.1.1")):
            await page_run(page, rp, {"tab": "Decode"})
            return [gate.ledger.service[path[:n]] for n in (1, 2, 3)]
    charged = asyncio.run(run())
    assert took and all(c >= 0.95 * sum(took) for c in charged), (charged, sum(took))


def test_a_run_whose_budget_ends_while_drawing_shows_what_was_drawn_and_says_so(parts, monkeypatch):
    """Each view takes 0.5 s to draw; the Run's budget (2 s) ends during its last drawing (its worker stopped at
    about 1 s, half the budget kept for it): the request ends within its budget (0.4 s allowed for a loaded
    machine), its text and some of the tab's views are sent, and one line says how many. Before, every view was
    drawn whatever the time (2 s of drawing from about 1.3 s)."""
    full, rp = parts
    drawing_timed(monkeypatch, view_s=0.5)
    page = Page(Quick(full, forwards=100, pause_s=0.05), {})
    tab = [rp.views.plots[x.name] for x in in_tab("Decode")]
    t0 = time.monotonic()
    with pytest.warns(UserWarning, match=r"time budget ended while this run was drawn: \d of its 4 views") as w:
        sent = asyncio.run(page_run(page, rp, {"tab": "Decode"}, budget_s=2.0, started=t0))
    took = time.monotonic() - t0
    head = max(i for i, p in enumerate(sent) if rp.views.delta in p)      # the last drawing's first piece
    last = {c: val for p in sent[head:] for c, val in p.items()}
    drawn = [c for c in tab if last.get(c) is not None]
    assert took < 2.0 + 0.4, took
    assert rp.views.text in last and 0 < len(drawn) < len(tab), len(drawn)
    assert sum("time budget ended while" in str(x.message) for x in w) == 1


async def drained(page, rp) -> None:
    """One page Run whose parts are let go once sent, as the server does once it has serialized them."""
    async for _ in decode_tab.decode(page, rp.views, "a prompt", None, "llada", {}, None, {"tab": "Decode"}, None):
        pass


def test_a_bystander_is_answered_while_forty_page_runs_draw(parts):
    """Forty page Runs stream and draw at once (their frames and their last drawing, the page's real figures), the
    heap settled as the app settles it once built (``startup.settle_heap``): the event loop's longest gap and a
    bystander's GET stay under 100 ms (the issue's target; wall time less the loop's waits for a core held by other
    jobs, ``tests/clocks.py``), and a full collection takes under 30 ms of CPU. Before, the drawing took asyncio's
    six default threads and a full collection walked the whole start-up heap (0.17 s of CPU in this process),
    stopping the event loop with every other thread: gaps of 0.8-1.8 s here."""
    full, rp = parts
    page = Page(Quick(full, forwards=6, pause_s=0.05), {})

    async def main():
        done, gaps, gets = asyncio.Event(), [], []

        async def runs():
            await asyncio.gather(*(drained(page, rp) for _ in range(40)))
            done.set()

        async def ticker():
            last = own_clock()
            while not done.is_set():
                await asyncio.sleep(0.005)
                now = own_clock()
                gaps.append(now - last - 0.005)
                last = now
                if len(gaps) % 5 == 0:
                    gets.append(await timed_get(answer))
        await asyncio.gather(runs(), ticker())
        return max(gaps), max(gets), len(gets)
    startup.settle_heap()
    try:
        t0 = time.process_time()
        gc.collect()                   # what the interpreter starts now and then, at any allocation
        full_s = time.process_time() - t0
        # best of three, from before ``own_clock``: a machine at a load of 15-20 descheduled the loop past the
        # bound, which the clock now leaves out (the retries may be redundant now; not yet measured without)
        trials = []
        while len(trials) < 3 and (not trials or max(trials[-1][:2]) >= 0.1):
            trials.append(asyncio.run(main()))
    finally:
        gc.unfreeze()                  # the rest of the suite's objects are collected as usual
    print("; ".join(f"longest event-loop gap {g * 1000:.1f} ms, slowest of {n} GETs {w * 1000:.1f} ms"
                    for g, w, n in trials))
    assert full_s < 0.03 and min(max(g, w) for g, w, _ in trials) < 0.1, full_s


def test_runs_streaming_at_once_draw_their_frames_in_a_quarter_of_the_time(parts, monkeypatch):
    """Ten page Runs stream 60 forwards each (~1.2 s) at once, each frame's view taking 0.05 s to draw: their
    frames together take at most ``FRAME_SHARE`` of the time (plus each run's first frame and 0.3 s for a loaded
    machine), each run still shows frames while it streams, and each ends with its last drawing. Before, every run
    drew a frame every 0.25 s: both drawing threads drew frames all the time (twice the time, here)."""
    full, rp = parts
    took = drawing_timed(monkeypatch, view_s=0.05)
    frames = []
    real = decode_tab.frame

    def counted(*a):
        t0 = time.monotonic()
        out = real(*a)
        frames.append(time.monotonic() - t0)
        return out
    monkeypatch.setattr(decode_tab, "frame", counted)
    page = Page(Quick(full, forwards=60, pause_s=0.02), {})

    async def main():
        t0 = time.monotonic()
        sent = await asyncio.gather(*(page_run(page, rp, {"tab": "Decode"}) for _ in range(10)))
        return time.monotonic() - t0, sent
    elapsed, sent = asyncio.run(main())
    assert took
    assert sum(frames) <= worker.FRAME_SHARE * elapsed + 10 * 0.06 + 0.3, (sum(frames), elapsed, len(frames))
    assert all(any(rp.views.delta in p for p in s) for s in sent)            # every run's last drawing
    assert len(frames) >= 10                                                   # each run showed frames
