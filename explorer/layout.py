"""The Gradio page, wired from its parts (``explorer.page``): the run bar on top (prompt, held-out problems, model,
decoder, Run / Stop, the tour), the live decode first below it (the tour's pinned card, summary, text, the scrubber
with step, ◀ / ▶ / play, speed, position and link, tabs for the views, Compare, Sweep, Masks, the glossary), the
chosen decoder's parameters beside it (after it on a phone). This module only connects components to handlers; the
page never touches torch."""

from __future__ import annotations

import html
import time
from types import MappingProxyType

from pathlib import Path

import gradio as gr

from engine.errors import UserError
from explorer.glossary import GLOSSARY
from explorer.page import branch, compare, controls, decode_tab, masks, playback, share, sweep, tour
from explorer.page.api import register_api
from explorer.page import assets_cache, bodylimit, bounds, fair, frame_guard, more_views, presence, proxy, serverlog
from explorer.page import sessions, theme, untouched
from explorer.page.context import STATE_TTL_S, Page, fairly, js, shown_error
from explorer.page.run import RunParts, controls_of, run_setting, show_stopped, show_trace, shown_first, start_at
from engine.catalogue.spec import parse_spec

CSS_PATH = Path(__file__).resolve().parent.parent / "assets" / "style.css"
MODEL = dict(concurrency_id="model", concurrency_limit=fair.CAPACITY)   # every one reaches the gate, which orders them


def model_run(rp: RunParts) -> dict:
    """A run's event: one at a time (the model), its progress shown on the text view only (a spinner on each of
    the run's forty outputs cost the browser ~0.5 s per streamed frame)."""
    return dict(MODEL, show_progress="minimal", show_progress_on=[rp.views.text])


def build_demo(page: Page) -> gr.Blocks:
    # delete_cache: gradio keeps its own copy of every returned file (exports); drop those older than 30 min
    with gr.Blocks(title="Unmask — see how diffusion LMs decode", delete_cache=(600, 1800)) as demo:
        gr.Markdown("## Unmask · watch a diffusion language model unmask its answer, forward by forward",
                    elem_id="title")
        bar = controls.build_run_bar(page)
        # a run's traces are the heaviest per-session state: let them go after STATE_TTL_S without an update
        trace_state, previous = gr.State(None, time_to_live=STATE_TTL_S), gr.State(None, time_to_live=STATE_TTL_S)
        with gr.Row(equal_height=False):
            # the output first: on a phone it comes before the parameters
            with gr.Column(scale=2, min_width=340, elem_id="output-col"):
                card = tour.build_tour()
                summary, delta, text = decode_tab.build_summary()
                scrubber = playback.build_playback()
                branch_here = gr.Button("Branch here: what if, from this step?", elem_id="branch-here", size="sm")
                views = decode_tab.build_view_tabs(summary, delta, text)
                gr.HTML(more_views.more_views_html(page), elem_id="more-views")   # the tabs this run leaves out
                with gr.Tabs(elem_id="more-tabs", overflow_behavior="wrap") as more:   # a phone shows all five
                    with gr.Tab("Compare"):
                        compare.build_compare(page, bar[0], bar[2], trace_state)
                    with gr.Tab("Branch", id="branch"):
                        bp = branch.build_branch()
                    with gr.Tab("Sweep"):
                        sw = sweep.build_sweep(page, bar[2])
                    with gr.Tab("Masks"):
                        masks.build_masks()
                    with gr.Tab("Glossary"):
                        gr.Markdown(GLOSSARY, elem_id="glossary")
                sh = share.build_share()
            with gr.Column(scale=1, min_width=300, elem_id="params-col"):
                c = controls.build_params(page, bar)
                start_at(page, c, shown_first(page, {}))
        register_api(page)
        rp = RunParts(views, c, sh.export, trace_state, previous)
        controls.wire_controls(page, c)
        playback.wire_playback(scrubber, views, trace_state)
        share.wire_share(page, sh, trace_state)
        wire_views(views, trace_state)
        runs = wire_runs(page, rp, sw)
        branch.wire_branch(page, bp, branch_here, trace_state, views.tab, more, "branch",
                           dict(MODEL, show_progress="minimal"))
        wire_tour(page, rp, card, bp, more)
        wire_stop(page, rp, [*runs, wire_load(demo, page, rp, bp, more)])
    hide_page_handlers(demo)
    guard_inputs(demo)
    untouched.skip_untouched(demo)     # outputs a message leaves alone: nothing built on the event loop
    return demo


def guard_inputs(demo: gr.Blocks) -> None:
    """Every value a client sends is checked by gradio's preprocessing before a handler sees it (the input count,
    file data outside the app's files, each component's own check). Whatever it refuses is bad input by
    definition: it becomes the page's one-line message and one short log line, not gradio's traceback echoing the
    value. The guard sits on the Blocks, not on each component, because a handler's update (Branch here's
    candidates, the Sweep's settings) gives a session its own copy of the component. An event that runs in the
    browser only is refused outright: the page never sends it to the server."""
    preprocess = demo.preprocess_data

    async def checked(block_fn, inputs, state, explicit_call: bool = False):
        if block_fn.fn is None:
            raise shown_error("this event runs in the browser only")
        refused = bounds.unbounded(block_fn.inputs, inputs)
        if refused:        # before gradio keeps the values in the session and before the request waits for the model
            raise shown_error(refused, escape=block_fn.api_name != "decode")
        try:
            return await preprocess(block_fn, inputs, state, explicit_call)
        except Exception as e:   # gradio's check of a client's values (its gr.Error too): bad input by definition
            # a script reads the decode API's errors as text (as decode's own); the page's pop-ups are HTML
            raise shown_error(f"not a value this page takes ({' '.join(str(e).split())[:120]})",
                              escape=block_fn.api_name != "decode") from None

    demo.preprocess_data = checked


def hide_page_handlers(demo: gr.Blocks) -> None:
    """Only ``decode`` is meant for clients: every page handler is left out of the API listing ("undocumented").
    Making them "private" would not make them safer, as gradio's server still answers any handler by its index, so
    each validates its own inputs; undocumented keeps them reachable to this repository's load tests."""
    for fn in demo.fns.values():
        if fn.api_name != "decode":
            fn.api_visibility = "undocumented"


def wire_views(views, trace_state) -> None:
    plots = list(views.plots.values())
    for name, tab in views.tabs.items():
        tab.select(lambda box, tr, name=name: decode_tab.tab_opened(views, name, box, tr), [views.tab, trace_state],
                   plots, show_progress="hidden")


# Run's label says whether a run is on, set in the browser: as server functions (a run's first and last step) each
# was a round trip through the queue, and at each step of a server function gradio's page refreshes the loading
# status of every component an event has read or written, each found by a walk of the whole layout
RUNNING_WORD = "Running…"
RUNNING, IDLE = f"() => '{RUNNING_WORD}'", "() => 'Run'"
# Run: the text view scrolls into sight (on a phone it is below the bar) and the button says a run is on
RUN_STARTS = f"""() => {{ const t = document.getElementById('text'); if (t && t.getBoundingClientRect().top >
  window.innerHeight * 0.6) t.scrollIntoView({{block: 'start'}}); return '{RUNNING_WORD}'; }}"""


def session_of(request) -> str | None:
    """The visitor's session as gradio names it (None outside a request): a free-text prompt's cached run is
    that session's alone (``Page.cache_scope``)."""
    return getattr(request, "session_hash", None) or None


def wire_runs(page, rp: RunParts, sw) -> list:
    c, v = rp.controls, rp.views

    async def on_run(request: gr.Request, box, prev, prompt_v, model_v, decoder_v, *values):
        parse = lambda: (decoder_v, share.from_controls(c.keys, decoder_v, values))  # noqa: E731
        async for out in fairly(page, "run", request, run_setting(
                page, rp, parse, prompt_v, model_v, None, box, prev, set_controls=False, session=session_of(request))):
            yield out

    async def on_release(request: gr.Request, box, prev, prompt_v, model_v, decoder_v, *values):
        """A slider's run. gradio defers a release during a run until that run ends, after the run's idle step
        has said "Run" (``trigger_mode="always_last"``), so the deferred run says it is on in its first frame."""
        on = {c.run: gr.Button(RUNNING_WORD)}
        async for out in on_run(request, box, prev, prompt_v, model_v, decoder_v, *values):
            yield {**out, **on}
            on = {}

    inputs = [v.tab, rp.previous, *rp.setting]
    # the events Stop cancels are the runs themselves: gradio's cancel of a chain's last step (Run's idle) leaves
    # the run before it going
    events = [c.run.click(None, None, c.run, js=RUN_STARTS, show_progress="hidden")
              .then(on_run, inputs, rp.run_outputs, **model_run(rp))]
    events[0].then(None, None, c.run, js=IDLE, show_progress="hidden")
    # changing a decoding parameter re-runs on release (cached runs return at once), the button saying a run is on
    # as for Run itself; one event for every slider, so a release during a run waits for it and then runs the
    # controls as they are then (a page's fifty-nine chains of three events made it a third of the page's events)
    released = gr.on([comp.release for comp in c.components if isinstance(comp, gr.Slider)], None, None, c.run,
                     js=RUNNING, show_progress="hidden") \
        .then(on_release, inputs, [*rp.run_outputs, c.run], trigger_mode="always_last", **model_run(rp))
    events.append(released)
    released.then(None, None, c.run, js=IDLE, show_progress="hidden")
    events.append(wire_pick(rp, on_run))
    wire_sweep_opens(page, rp, sw)
    return events


def wire_sweep_opens(page, rp: RunParts, sw) -> None:
    """The Sweep's Open (a setting on the current prompt) and Open this problem (a wrong answer as it was decoded):
    each a run into the main views that sets the controls to its setting."""
    c, v = rp.controls, rp.views

    async def open_point(request: gr.Request, box, prev, spec, prompt_v, model_v):
        """A sweep setting, decoded on the current prompt into the main views."""
        if not spec or not isinstance(spec, str):
            raise shown_error("choose a setting first")
        async for out in fairly(page, "run", request, run_setting(
                page, rp, lambda: parse_spec(spec), prompt_v, model_v, None, box, prev, session=session_of(request))):
            yield out

    sw.open.click(open_point, [v.tab, rp.previous, sw.point, c.prompt, c.model], rp.outputs, **model_run(rp))

    async def open_wrong(request: gr.Request, box, prev, result, spec, index, model_v):
        """A wrong answer of a sweep's setting, decoded as the sweep decoded it (its problem, its seed)."""
        row = next((r for r in (result or {}).get("rows", []) if r.get("spec") == spec), None)
        if row is None:
            raise shown_error("run a sweep and choose a setting first")
        try:
            prompt, name, params, prob = page.service.sweep_problem(result["task"], spec, row["outcomes"], index)
        except UserError as e:
            raise shown_error(str(e)) from None
        page.remember(prob)                      # its run gets the task's verdict in the summary
        gr.Info(html.escape(f"From the sweep: {result['task']} problem {index + 1}, which {spec} got wrong there; "
                            "decoded again with the same seed (the checker's verdict is in the summary)."))
        async for out in fairly(page, "run", request, run_setting(
                page, rp, lambda: (name, params), prompt, model_v, None, box, prev, session=session_of(request))):
            yield out

    sw.open_wrong.click(open_wrong, [v.tab, rp.previous, sw.result, sw.point, sw.wrong, c.model], rp.outputs,
                        **model_run(rp))


def wire_stop(page, rp: RunParts, events: list) -> None:
    """Stop: the run's request is cancelled (also while it waits for the model), whichever started it (Run, a
    slider, a picked problem, a link); the part it decoded stays, as a run that says it was stopped."""
    async def on_stop(box, prev):
        return await show_stopped(page, rp, box, prev)

    # its words come at once from the browser's last frame (stop_words.js); the server's stopped run follows
    rp.controls.stop.click(lambda: gr.Button("Run"), None, rp.controls.run, cancels=events, js=js("stop_words.js"),
                           show_progress="hidden").then(on_stop, [rp.views.tab, rp.previous], rp.run_outputs,
                                                        show_progress="hidden")


def wire_pick(rp: RunParts, on_run):
    """A held-out problem picked runs at once (the prompt box takes it too), so the old text never stands under
    the new prompt; the event, for Stop to cancel."""
    c, v = rp.controls, rp.views

    async def on_pick(request: gr.Request, box, prev, picked, model_v, decoder_v, *values):
        if not isinstance(picked, str) or not picked:
            yield {rp.trace: gr.skip()}
            return
        async for out in on_run(request, box, prev, picked, model_v, decoder_v, *values):
            yield out

    picks = [v.tab, rp.previous, c.examples, c.model, c.decoder, *c.components]
    ev = c.examples.input(None, None, c.run, js=RUN_STARTS, show_progress="hidden") \
        .then(on_pick, picks, rp.run_outputs, **model_run(rp))
    ev.then(None, None, c.run, js=IDLE, show_progress="hidden")
    return ev


def quiet(rp: RunParts) -> dict:
    """An event that sets the controls without a spinner: its loading status kept on the text view alone, which
    gradio's page refreshes at every step of every later event (``RunParts.run_outputs``)."""
    return dict(show_progress="hidden", show_progress_on=[rp.views.text])


def wire_tour(page, rp: RunParts, card, bp, more) -> None:
    """Each stop: its run at its step, its tab open, its text in the pinned card, its view pointed at (a stop
    with a pre-baked branch also fills the Branch tab and opens it)."""
    box, text, back, nxt, close, idx = card
    v = rp.views

    def show(i, tab_box, prev):
        i, html_, ex, s, tab = tour.tour_stop(page, i)
        if isinstance(tab_box, dict):
            tab_box["tab"] = tab                      # the run is drawn in the stop's tab
        out = {idx: i, text: html_, box: gr.Column(visible=True), **dict(zip((back, nxt), tour.buttons(i))),
               **show_trace(page, rp, ex, s, prev, example=True, box=tab_box)}
        br = page.example_traces.get(tour.STOPS[i].branch)
        if br is not None:
            out.update(zip((bp.out, *bp.figs), branch.view(page, ex, br)))
            out[more] = gr.Tabs(selected="branch")
        return out

    outs = [idx, text, box, back, nxt, *rp.outputs, bp.out, *bp.figs, more]
    for button, move in ((rp.controls.tour, lambda i: 0), (nxt, lambda i: i + 1), (back, lambda i: i - 1)):
        button.click(lambda i, b, p, move=move: show(move(i if isinstance(i, int) else -1), b, p),
                     [idx, v.tab, rp.previous], outs, **quiet(rp)).then(None, js=tour.POINT_JS)
    close.click(lambda: (gr.Column(visible=False), -1), None, [box, idx], show_progress="hidden",
                js="() => document.querySelectorAll('.um-tour-target').forEach(e => "
                   "e.classList.remove('um-tour-target'))")


NO_LINK = MappingProxyType(dict(values=MappingProxyType({}), run=False))  # a link's events called without one


def link_controls(page, c, lk) -> dict:
    """The controls a link sets: its values, or (a link without a run: a step, a tab, a recorded trace) the
    setting of the run it shows."""
    lk = lk if isinstance(lk, dict) else NO_LINK
    values = lk["values"]
    if not lk["run"]:
        shown = shown_first(page, values)
        return controls_of(page, c, shown) if shown is not None else {c.prompt: gr.skip()}
    return {c.prompt: values.get("prompt", gr.skip()), c.model: values.get("model", gr.skip()),
            c.decoder: values.get("decoder", gr.skip()),
            **{comp: values[k] for k, comp in c.values.items() if k in values}}


def wire_load(demo, page, rp: RunParts, bp, more):
    """A plain page load shows the pre-baked run (``shown_first``) under the controls built at its setting
    (``start_at``) and writes no control; a link (``link``, None on a plain load) then sets the controls and, where
    it asks for one, runs its setting (its branch too)."""
    c, v = rp.controls, rp.views
    link = gr.State(None)

    def load(tab_box, request: gr.Request = None):  # gradio injects the request by its annotation
        values, run = share.url_values(page, request)
        # a link that asks for a run: its request (and budget) starts here, at the page's load
        out = {c.run: gr.Button(RUNNING_WORD) if run else gr.skip(),      # a link's run: the button says so
               link: dict(values=values, run=time.monotonic() if run else False) if values else None}
        if isinstance(tab_box, dict) and values.get("tab"):   # a link's tab: opened once its run, filling it, shows
            tab_box["tab"] = values["tab"]
        example = None if run else shown_first(page, values)
        if example is not None:   # a pre-baked run, shown before any model call
            out.update(show_trace(page, rp, example, None, None, example=True, box=tab_box, set_controls=False))
        return out

    def set_link(lk):
        return link_controls(page, c, lk)

    async def maybe_run(request: gr.Request, lk, box, prev, prompt_v, model_v, decoder_v, *values):
        lk = lk if isinstance(lk, dict) else NO_LINK
        go, step_v, branch_v = lk["run"], lk["values"].get("step"), lk["values"].get("branch")
        if not go:
            yield {rp.trace: gr.skip()}
            return
        parse = lambda: (decoder_v, share.from_controls(c.keys, decoder_v, values))  # noqa: E731

        async def linked():
            # a link to a branch: its base run is shown, then the branch, in the same event and one budget (the
            # base run may take half of it; the branch has what is left)
            shown, t0 = None, min(go, time.monotonic())
            base_budget = page.service.max_seconds / 2 if branch_v else None
            async for out in run_setting(page, rp, parse, prompt_v, model_v,
                                         step_v if isinstance(step_v, int) else None, box, prev,
                                         session=session_of(request), budget_s=base_budget, started=t0):
                shown = out[rp.trace] if hasattr(out.get(rp.trace), "records") else shown
                yield out
            if branch_v:
                async for out in branch.from_link(page, shown, branch_v, started=t0):
                    yield dict(zip((bp.out, *bp.figs, more), out))

        try:
            async for out in fairly(page, "run", request, linked()):
                yield out
        except Exception:
            yield {c.run: gr.Button("Run")}     # the link's run is over, refused or not: the button says so
            raise
        yield {c.run: gr.Button("Run")}

    demo.load(load, v.tab, [link, c.run, *rp.run_outputs])
    # a state's change event fires only when an event changed it: a plain load (None to None) starts neither
    linked_run = link.change(set_link, link, rp.setting, **quiet(rp)) \
        .then(maybe_run, [link, v.tab, rp.previous, *rp.setting], [*rp.outputs, bp.out, *bp.figs, more, c.run],
              **model_run(rp))
    linked_run.then(None, js=branch.show_js("branch-out"))            # a link's branch: its result in sight
    return linked_run            # for Stop to cancel


def launch_kwargs() -> dict:
    """The page has no upload control: an upload above a few kB is refused (gradio answers 413). At most
    UNMASK_SESSIONS (default 256) sessions keep their state (the oldest are dropped): ~12 MiB for one that ran
    a Run, so ~3 GiB; a session unused for UNMASK_SESSION_IDLE_S is let go sooner (``explorer.page.sessions``)."""
    serverlog.install()
    # gradio starts at most ``max_threads`` events at once (40 by default) and queues the rest first come, first
    # served: every model request must reach the fair queue instead (a sync handler's threads stay bounded by its
    # event's concurrency limit, 4 by default)
    return dict(css=CSS_PATH.read_text() if CSS_PATH.exists() else None, theme=theme.theme(), max_file_size="16kb",
                state_session_capacity=sessions.capacity(), max_threads=fair.CAPACITY,
                app_kwargs={"lifespan": sessions.lifespan(), "middleware": middleware()})


def middleware() -> list:
    """Request bodies bounded and uploads refused, outermost (``bodylimit``); each session's open event streams
    counted (``presence.Presence``: a gone client's work stops); the page's scripts and styles served from memory,
    compressed once (``assets_cache``); the page's frame guard first in its head (``frame_guard``); on a Space
    without a named proxy, the visitor's address read from the platform's ``X-Forwarded-For`` (``proxy``)."""
    from starlette.middleware import Middleware
    out = [Middleware(bodylimit.BodyLimit), Middleware(presence.Presence), Middleware(assets_cache.AssetCache),
           Middleware(frame_guard.FrameGuard)]
    if proxy.mode() == "space":
        out.append(Middleware(proxy.SpaceClient))
    return out
