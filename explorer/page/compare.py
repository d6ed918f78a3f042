"""Compare: two decoder SPECs on the prompt above, streamed side by side, with the speed and quality deltas."""

from __future__ import annotations

from functools import partial

import gradio as gr

from engine.catalogue import catalogue
from engine.errors import UserError
from engine.catalogue.spec import parse_spec
from explorer.grid import Grid
from explorer.page import fair
from explorer.page.context import Page, failed_panel, fairly, js
from explorer.page.worker import INTERVAL_S, DrawClock, follow
from explorer.views import heatmaps
from explorer.views.compare import compare_summary


def build_compare(page: Page, prompt, model, trace_state) -> None:
    gr.Markdown("Two decoder settings on the prompt above, side by side. Settings use the CLI's SPEC syntax "
                "(`name:key=value,...`, keys as in the catalogue). A follows the run shown (same dials and seed: "
                "the same text) until you edit it; *A: the run shown* follows it again.")
    with gr.Row():
        first = compare_defaults(page, page.default_model)
        a0, b0 = first if isinstance(first[0], str) else PAIRS[0]
        opening = page.example_traces.get(catalogue.DEFAULT_DECODER)
        if opening is not None and opening.meta.model == page.default_model:
            a0 = spec_of(opening)
        spec_a = gr.Textbox(a0, label="A", elem_id="spec-a")
        spec_b = gr.Textbox(b0, label="B", elem_id="spec-b")
    # empty until A is edited by hand (assets/js/compare_follow.js says so there)
    gr.HTML("", elem_id="spec-a-note", js_on_load=js("compare_follow.js"))
    with gr.Row():
        go_btn = gr.Button("Compare", elem_id="compare")
        shown = gr.Button("A: the run shown", elem_id="compare-shown")
        stop_btn = gr.Button("Stop", elem_id="compare-stop", variant="stop")
    shown.click(lambda tr: spec_of(tr) if tr is not None else gr.skip(), trace_state, spec_a, show_progress="hidden")
    out = gr.HTML(elem_id="compare-out")
    with gr.Row():
        fig_a, fig_b = gr.Plot(label="A: mask state"), gr.Plot(label="B: mask state")
    evt = go_btn.click(partial(run_compare, page), [prompt, model, spec_a, spec_b], [out, fig_a, fig_b],
                       concurrency_id="model", concurrency_limit=fair.CAPACITY, api_name="compare")
    stop_btn.click(None, None, None, cancels=[evt])
    model.change(partial(model_defaults, page), [model, trace_state], [spec_a, spec_b], show_progress="hidden")


PAIRS = (("threshold:tau=0.9,block_size=8", "s2d2:preset=sdar-a"),      # a parallel rule against its verifier
         ("threshold:tau=0.9,block_size=8", "llada:block_size=8,steps=8"),
         ("uniform", "uniform:entropy_bound=0.5"))


def spec_of(trace) -> str:
    """A run's SPEC: its decoder and each dial that differs from the decoder's default (the seed among them), so
    Compare decodes it again as it was."""
    m = trace.meta
    defaults = {k: p.default for k, p in catalogue.params_of(m.decoder).items()} \
        if m.decoder in catalogue.DECODERS else {}          # a recorded loop's (explorer.recorded): no dials
    changed = [f"{k}={v}" for k, v in m.params.items() if k in defaults and defaults[k] != v]
    return m.decoder + (":" + ",".join(changed) if changed else "")


def compare_defaults(page: Page, model) -> tuple[str, str]:
    """Compare's two settings for a model: the first pair whose decoders both apply to it (its model info says
    which do), so a switch of model never leaves a setting that fails on it."""
    info = page.model_infos.get(model) if isinstance(model, str) else None
    runs = {d for d, why in ((info or {}).get("decoders") or {}).items() if not why}
    for a, b in PAIRS:
        if {a.split(":")[0], b.split(":")[0]} <= runs:
            return a, b
    return gr.skip(), gr.skip()


def model_defaults(page: Page, model, shown) -> tuple:
    """Compare's settings once a model is picked: a run shown on that model keeps A (it follows that run, or holds
    what the visitor typed: assets/js/compare_follow.js) and B is the model's pair's; otherwise both are the pair's,
    so no setting is left that fails on the model."""
    a, b = compare_defaults(page, model)
    return (gr.skip() if getattr(getattr(shown, "meta", None), "model", None) == model else a), b


def both(page: Page, prompt, model, specs, should_stop=None):
    """Both decodes share the engine loop's rounds and are read in turn, so both stream; yields (trace A,
    trace B, (whether A has ended, whether B has))."""
    runs = [page.service.stream(prompt, *spec, model, page=True, client=fair.client(), every_s=INTERVAL_S,
                                should_stop=should_stop) for spec in specs]
    last, live = [None, None], [True, True]
    while any(live):
        for i, gen in enumerate(runs):
            if live[i]:
                trace = next(gen, None)
                live[i] = trace is not None
                last[i] = trace or last[i]
        if last[0] is not None and last[1] is not None:
            yield (*last, (not live[0], not live[1]))


async def run_compare(page: Page, prompt, model, a: str, b: str, request: gr.Request = None):
    """Runs in a worker (``follow``) once the gate lets it: the newest pair a few times a second, stopped with
    the request."""
    async for out in fairly(page, "compare", request, compared(page, prompt, model, a, b)):
        yield out


async def compared(page: Page, prompt, model, a: str, b: str):
    try:
        model = page.check_model(model)
        specs = [parse_spec(spec) for spec in (a, b)]
        clock = DrawClock(page.service.max_seconds)      # the last drawing fits in the budget too
        async for f in follow(lambda should_stop: both(page, prompt, model, specs, should_stop),
                              page.service.max_seconds, reserve=clock.reserve):
            if f.value is not None:
                if f.limit:
                    gr.Warning(f.limit)
                yield await clock.draw(view, page, *f.value, f.final, f.limit)
    except UserError as e:          # in the panel, the previous comparison cleared (``failed_panel``)
        yield failed_panel("The comparison", e), None, None


def view(page: Page, ta, tb, ended=(True, True), final: bool = True, limit: str | None = None):
    """The summary and both mask maps, on one step axis and one height, so the two read against each other;
    ``ended``: which sides have decoded to their end (only those get the checker's verdict: the main view's is
    silent while a run streams too); ``final``: the comparison has ended (``limit``: the request limit that ended
    it early, and the answers with it)."""
    n = max(len(ta.records), len(tb.records))
    grids = [Grid.of(t) for t in (ta, tb)]
    cols = max(len(g.labels) for g in grids)       # one x range: both runs' columns line up, the shorter padded
    figs = [heatmaps.mask_state(t, None, g).update_layout(
        height=heatmaps.rows_height(n), yaxis=dict(range=[n + 0.5, 0.5]),
        xaxis=dict(range=[-0.5, cols - 0.5], nticks=min(24, cols), tickfont=dict(size=9)))
        for t, g in zip((ta, tb), grids)]
    verdicts = [page.verdict(t) if done and not (limit and t.meta.limit) else None for t, done in zip((ta, tb), ended)]
    return (compare_summary(ta, tb, *verdicts, final=final, limit=limit), *figs)
