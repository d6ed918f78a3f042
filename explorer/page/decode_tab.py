"""The decode: summary, text, candidates and the registry's views in their tabs, and the handlers that stream a
run into them and finish it.

While a run streams, only the summary, the text and the views of the visible tab are drawn, a few times a second
(one figure per frame). When it ends (or comes at once from the trace cache) the visible tab's views are drawn at
the step shown, together with the run's per-step data for the browser's scrubber (``explorer.scrub``), in small
messages; another tab's views are drawn once, when it is opened. Everything describing the run (delta, link,
export, controls) is derived from the finished trace (``finished``, ``explorer.page.run``), whichever handler
produced it. Only ``UserError`` becomes a message in the page: any other exception is a bug and stays one.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

import gradio as gr

from engine import __version__ as ENGINE_VERSION
from engine.catalogue import catalogue
from engine.errors import UserError
from explorer import scrub
from explorer.glossary import how_to_read
from explorer.page.compare import spec_of
from explorer.page.context import Page, shown_error
from explorer.page.share import query_for
from explorer.page import fair, presence
from explorer.page.worker import INTERVAL_S, STREAMING, DrawClock, follow, in_thread
from explorer.render import render_panels, render_views
from explorer.store import canonical_key
from explorer.views import candidates, summary, text
from explorer.registry import TAB_NOTES, TABS, VIEWS, in_tab, names_in, tabs_shown, views_shown


@dataclass
class Views:
    summary: gr.HTML
    delta: gr.HTML
    text: gr.HTML
    candidates: gr.HTML
    plots: dict              # registry name -> gr.Plot
    run_data: gr.HTML        # the finished run's per-step data and link (read by assets/js/scrub.js)
    tab: gr.State            # {"tab": name of the visible view tab}: mutated in place, so a streaming run sees it
    tabs: dict               # tab name -> gr.Tab
    tab_group: gr.Tabs       # the view tabs (which one is open)

    @property
    def outputs(self) -> list:
        return [self.summary, self.delta, self.text, self.candidates, *self.plots.values(), self.run_data,
                self.tab_group]


# one colour code for the text view's slots (the same classes the text uses); each chip with its words in one item,
# so a narrow screen wraps between items, never between a chip and its label
LEGEND = ("<div class='um-legend'>" + "".join(f"<span class='um-leg'>{chips}{words}</span>" for chips, words in (
    ("<span class='um-tok um-mask'>\u25a2</span>", "masked"),
    ("<span class='um-tok um-mask um-draft'>draft</span>", "this step's proposal, not committed"),
    ("<span class='um-tok um-new' style='background:hsl(100,70%,82%)'>new</span>", "committed at this step"),
    ("<span class='um-tok' style='background:hsl(110,70%,82%)'>sure</span>"
     "<span class='um-tok' style='background:hsl(20,70%,82%)'>unsure</span>", "committed earlier, by confidence"),
    ("<span class='um-tok um-rev'><s>old</s>\u2192new</span>", "revised"),
    ("<span class='um-tok um-noise'>noise</span>", "uniform canvas, not kept yet"))) + "</div>")


def note(module, elem_id: str | None = None) -> None:
    """A collapsed "how to read this" under a view, taken from the view module's docstring."""
    with gr.Accordion("How to read this", open=False, elem_id=elem_id):
        gr.Markdown(how_to_read(module))


def build_summary() -> tuple:
    s = gr.HTML(elem_id="summary")
    delta = gr.HTML(elem_id="delta")
    note(summary)
    txt = gr.HTML(elem_id="text")
    gr.HTML(LEGEND, elem_id="legend")
    note(text)
    return s, delta, txt


def build_view_tabs(s, delta, txt) -> Views:
    cand = gr.HTML(elem_id="candidates")
    note(candidates)
    plots, tabs = {}, {}
    # "wrap": a narrow screen shows every tab the run has on extra rows; gradio's overflow menu would measure the
    # tabs the browser hides for the run too, and tuck a decoder's own tab into "⋯" on a phone
    with gr.Tabs(elem_id="view-tabs", selected=TABS[0], overflow_behavior="wrap") as group:
        for tab in TABS:
            with gr.Tab(tab, id=tab, elem_id="tab-" + tab.split()[0].lower()) as tabs[tab]:
                if tab in TAB_NOTES:
                    gr.Markdown(TAB_NOTES[tab])
                for v in in_tab(tab):
                    plots[v.name] = gr.Plot(label=v.label, elem_id=v.elem_id)
                    if v.doc is not None:       # hidden with its view (scrub.js) by this id
                        note(v.doc, f"{v.elem_id}-note")
    run_data = gr.HTML("", elem_id="run-data")
    return Views(s, delta, txt, cand, plots, run_data, gr.State({"tab": TABS[0]}), tabs, group)


def shown(v: Views, panels: dict, views: dict) -> dict:
    """Rendered parts -> {component: value}, for the parts rendered (the others keep what they show)."""
    out = {getattr(v, k): val for k, val in panels.items()}
    out.update({v.plots[k]: val for k, val in views.items()})
    return out


def frame(page: Page, v: Views, tr, tab: str, k: int) -> dict:
    """A streaming run between forwards: summary, text and one of the visible tab's views (the k-th in turn) at the
    newest forward. One figure per frame keeps each of the browser's redraws short (Plotly redraws a figure in
    ~100 ms; four at once froze the page for half a second); each view of the tab still follows the run. No checker
    verdict: an unfinished answer is not a malformed one."""
    panels = render_panels(tr, None, None)       # the checker speaks once the answer is finished
    del panels["candidates"]
    views = in_tab(tab)
    return {**shown(v, panels, render_views(tr, None, names={views[k % len(views)].name})), v.run_data: ""}


def in_pieces(v: Views, parts: dict, tab: str) -> list[dict]:
    """A finished run's parts as several messages: the panels first, then one figure each (the visible tab's
    first), and the scrubber's data last, so the browser redraws in short tasks and the scrubber takes over only
    once every figure has arrived."""
    plots = [v.plots[x.name] for x in sorted(VIEWS, key=lambda x: x.tab != tab)]
    head = {c: val for c, val in parts.items() if c not in plots and c is not v.run_data}
    pieces = [head] + [{c: parts[c]} for c in plots if c in parts]
    pieces[-1] = {**pieces[-1], v.run_data: parts[v.run_data]}
    return pieces


def tab_opened(v: Views, tab: str, box: dict, tr) -> dict:
    """A view tab was opened: remember it (a streaming run draws the visible tab), and draw its views if this run
    has not drawn them yet: while a run streams at the newest forward, for a finished run at the step the
    scrubber last settled on (the browser moves the cursors from there). A finished run's server-drawn views are
    left to the scrubber, which asks for them at its step and selected position once the tab shows: drawn here
    too, a slow draw without the position could land after the scrubber's and overwrite it."""
    nothing = {p: gr.skip() for p in v.plots.values()}
    if not isinstance(box, dict) or tr is None or not isinstance(tab, str):
        return nothing
    box["tab"] = tab
    if not tr.meta.finished:
        return shown(v, {}, render_views(tr, None, names=names_in(tab)))
    run, drawn = box.get("drawn", (None, set()))
    if run != tr.meta.run_id or tab in drawn:
        return nothing
    drawn.add(tab)
    step = min(max(1, int(box.get("step", len(tr.records)))), max(1, len(tr.records)))
    cursor_views = {x.name for x in in_tab(tab) if x.scrub != "server"}
    return shown(v, {}, render_views(tr, step - 1, names=cursor_views)) if cursor_views else nothing


CUT = ("the time budget ended while this run was drawn: {n} of its {m} views here are shown (UNMASK_MAX_SECONDS; "
       "open the tab again to draw the rest)")


def views_by(tr, step: int, names, deadline: float | None) -> tuple[dict, int]:
    """The views named (all: None) drawn one at a time while the next one, as slow as the slowest so far, ends
    before ``deadline`` (``time.monotonic()``), so a run's last drawing ends within its request's budget however
    slow the drawing is: (those drawn, how many were asked for)."""
    wanted = [x.name for x in VIEWS if names is None or x.name in names]
    out: dict = {}
    slowest = 0.0
    for name in wanted:
        t0 = time.monotonic()
        if deadline is not None and t0 + slowest >= deadline:
            break
        out.update(render_views(tr, step, names={name}))
        slowest = max(slowest, time.monotonic() - t0)
    return out, len(wanted)


def finished(page: Page, v: Views, tr, step_v: int | None, prev, example: bool = False, box=None,
             deadline: float | None = None) -> dict:
    """Everything the page shows of a finished run, at step_v (1-based; the last by default), drawn once. With the
    page's tab box, only the visible tab's views are drawn now; the others when their tab is opened. Past
    ``deadline`` (the request's budget) no more views are drawn: the panels and the views drawn so far are sent,
    with a one-line note (``CUT``)."""
    n = max(1, len(tr.records))
    s = n if step_v is None else min(max(1, int(step_v)), n)
    if tr.meta.limit and tr.meta.limit != scrub.STOPPED:     # Stop's own words are the text's (``ended_line``)
        gr.Warning(tr.meta.limit)
    run = str((tr.meta.run_id or "example"))
    tabs = tabs_shown(tr) or [TABS[0]]
    d = scrub.payload(tr)
    data = scrub.embed(d, query_for(page, tr), s, run, example,
                       [x.elem_id for x in VIEWS if x.scrub == "server"], tabs,
                       getattr(catalogue.DECODERS.get(tr.meta.decoder), "preview", "") or None,
                       [x.elem_id for x in VIEWS if x.positions], next(x.elem_id for x in VIEWS if x.previews),
                       [x.elem_id for x in views_shown(tr)], spec_of(tr), scrub.ended_line(tr, d))
    names = None
    if isinstance(box, dict):
        if visible(box) not in tabs:         # the open tab has nothing for this run: open its first that has
            box["tab"] = tabs[0]
        names = names_in(visible(box))
        box.update(drawn=(tr.meta.run_id, {visible(box)}), step=s)
    # a run stopped early has unfinished text: the checker stays silent, as while it streams
    views, wanted = views_by(tr, s - 1, names, deadline)
    if len(views) < wanted:
        gr.Warning(CUT.format(n=len(views), m=wanted))
        if isinstance(box, dict):
            box["drawn"][1].discard(visible(box))        # opened again, the tab draws its views
    out = shown(v, render_panels(tr, s - 1, None if tr.meta.limit else page.verdict(tr)), views)
    delta = "" if prev is None or prev is tr else summary.previous_delta(tr, prev)
    # the open tab is one with something to show; the browser hides the others (scrub.js: gradio 6.31's
    # gr.Tab(visible=False) update leaves the tab's button on the page)
    return {**out, v.run_data: data, v.delta: delta, v.tab_group: gr.Tabs(selected=visible(box) if box else tabs[0])}


async def decode(page: Page, v: Views, prompt_v, model_v, decoder_v, params, step_v, box, prev, session=None,
                 budget_s: float | None = None, started: float | None = None):
    """Stream a decode into the views (or take it from the trace cache), then finish the page. The engine runs in
    a worker (``follow``): the page shows its newest forward a few times a second, a cancelled request stops it,
    and the request's wall time, rendering included, is bounded by the service's budget. The cache is shared for
    the page's own prompts only; a free-text prompt's run is kept for its ``session`` alone
    (``Page.cache_scope``). ``budget_s``: this run's share of the request's budget (a link's base run leaves the
    rest to its branch), counted from ``started`` (a link's page load; default: its arrival at the fair gate,
    ``presence.arrived``). Yields (trace, parts)."""
    key, last, t0 = None, None, started or presence.arrived() or time.monotonic()
    budget = budget_s or page.service.max_seconds
    deadline = t0 + budget                # the final drawing too ends within it (``finished``)
    run_id = uuid.uuid4().hex[:12]     # marks every frame of this run in the page (the text view's data-run)
    live = Live(box, run_id)
    try:
        model = page.check_model(model_v)
        scope = page.cache_scope(prompt_v, session)
        if page.store is not None and scope is not None:
            key = canonical_key(model=page.service.model_id(model), prompt=page.service.check_prompt(prompt_v),
                                decoder=decoder_v, params=params, engine=ENGINE_VERSION, scope=scope)
            hit = None if live.fresh else await in_thread(page.store.get, key)
            if hit is not None:  # decoded before: explore at once, no model call
                hit.meta.run_id, hit.meta.finished, hit.meta.model, hit.meta.cached = run_id, True, model, True
                live.shown(hit)
                async for out in finish(page, v, hit, step_v, prev, box, deadline):
                    yield out
                live.drawn(hit)
                return
        produce = lambda should_stop: page.service.stream(  # noqa: E731
            prompt_v, decoder_v, params, model, page=True, client=fair.client(), every_s=INTERVAL_S,
            should_stop=should_stop)
        # the final drawing (every view of the tab, the scrubber's data, the export) must fit in the budget too
        k, clock = 0, DrawClock(budget)
        with STREAMING:                      # its frames are spaced by how many runs stream (``frame_due``)
            async for f in follow(produce, budget, started=t0, reserve=clock.reserve):
                last = f.value
                if last is None:
                    continue
                last.meta.run_id, last.meta.finished, last.meta.model = run_id, f.final, model
                if f.limit:
                    last.meta.limit = f.limit
                if not f.final and clock.frame_due():
                    parts, k = await clock.draw(frame, page, v, last, visible(box), k), k + 1
                    live.shown(last)
                    yield last, parts
        live.shown(last)   # it ran to its end (or a limit): a Stop during the final drawing shows it as it ended
    except UserError as e:  # shown to this visitor; the server goes on
        raise shown_error(str(e)) from None
    finally:
        live.end()
    if last is not None:
        if key is not None and not last.meta.limit:
            await in_thread(page.store.put, key, last)   # off the event loop; run_id and finished are set
            #                                               again on every hit
        async for out in finish(page, v, last, step_v, prev, box, deadline):
            yield out
        live.drawn(last)


class Live:
    """A streaming run's marks in the page's tab box (one dict per visitor, mutated in place: Stop's handler
    reads them while the run's request is being cancelled, ``explorer.page.run.show_stopped``): ``live`` the run
    still streaming, ``partial`` the last frame it showed (or its final one until its final drawing is sent: a
    Stop pressed as the run ends on its own cancels that drawing, and Stop's handler draws it instead). A run
    stopped by the visitor leaves ``fresh``: the next run of the same setting is decoded, not taken from the cache
    (the visitor wants to watch it decode)."""

    def __init__(self, box, run_id: str):
        self.box = box if isinstance(box, dict) else {}
        self.run_id, self.fresh = run_id, bool(self.box.pop("fresh", False))
        self.box["live"] = run_id
        self.box.pop("partial", None)

    def shown(self, tr) -> None:
        if tr is None:
            self.box.pop("partial", None)
        else:
            self.box["partial"] = tr

    def drawn(self, tr) -> None:
        """The run's final drawing is sent: nothing left for Stop to show (unless a newer run's frame is there)."""
        if self.box.get("partial") is tr:
            del self.box["partial"]

    def end(self) -> None:
        """The request is over (finished, failed or cancelled): its worker has stopped."""
        if self.box.get("live") == self.run_id:
            del self.box["live"]


async def finish(page: Page, v: Views, tr, step_v, prev, box, deadline: float | None = None):
    """A finished run, drawn off the event loop (within ``deadline``) and sent in pieces: yields (trace, piece)."""
    for piece in in_pieces(v, await in_thread(finished, page, v, tr, step_v, prev, False, box, deadline),
                           visible(box)):
        yield tr, piece


def visible(box) -> str:
    """The visible view tab, as the page last reported it (a dict the tab handlers update in place)."""
    tab = box.get("tab") if isinstance(box, dict) else None
    return tab if tab in TABS else TABS[0]
