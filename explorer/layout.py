"""The Gradio page, wired from its parts (``explorer.page``): controls on the left, the live decode on the right,
the scrubber (step, ◀ / ▶ / play, position, link) under the text, tabs for the views, Compare, Sweep, Masks, the
glossary and the tour. This module only connects components to handlers; the page never touches torch."""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from explorer.glossary import GLOSSARY
from explorer.page import compare, controls, decode_tab, masks, playback, share, sweep, tour
from explorer.page.api import register_api
from explorer.page.context import Page, shown_error
from explorer.page.run import RunParts, run_setting, show_trace
from engine.spec import parse_spec

CSS_PATH = Path(__file__).resolve().parent.parent / "assets" / "style.css"
MODEL = dict(concurrency_id="model", concurrency_limit=1)


def model_run(rp: RunParts) -> dict:
    """A run's event: one at a time (the model), its progress shown on the text view only (a spinner on each of
    the run's forty outputs cost the browser ~0.5 s per streamed frame)."""
    return dict(MODEL, show_progress="minimal", show_progress_on=[rp.views.text])


def build_demo(page: Page) -> gr.Blocks:
    # delete_cache: gradio keeps its own copy of every returned file (exports); drop those older than 30 min
    with gr.Blocks(title="Unmask — see how diffusion LMs decode", delete_cache=(600, 1800)) as demo:
        gr.Markdown("# Unmask\nWatch a diffusion language model unmask its answer, forward by forward: which "
                    "positions are still masked, how confident each candidate is, and what each decoder commits.")
        trace_state, previous = gr.State(None), gr.State(None)
        with gr.Row():
            with gr.Column(scale=1, min_width=320):
                c = controls.build_controls(page)
            with gr.Column(scale=2, min_width=0):
                summary, delta, text = decode_tab.build_summary()
                scrubber = playback.build_playback()
                views = decode_tab.build_view_tabs(summary, delta, text)
                with gr.Tabs():
                    with gr.Tab("Compare"):
                        compare.build_compare(page, c.prompt, c.model)
                    with gr.Tab("Sweep"):
                        sweep_point, sweep_open = sweep.build_sweep(page, c.model)
                    with gr.Tab("Masks"):
                        masks.build_masks()
                    with gr.Tab("Glossary"):
                        gr.Markdown(GLOSSARY)
                    with gr.Tab("Tour"):
                        tour_text, tour_btn, tour_idx = tour.build_tour()
                sh = share.build_share()
        register_api(page)
        rp = RunParts(views, c, sh.export, trace_state, previous)
        controls.wire_controls(page, c)
        playback.wire_playback(scrubber, views, trace_state)
        share.wire_share(page, sh, trace_state)
        wire_views(views, trace_state)
        wire_runs(page, rp, sweep_point, sweep_open)
        wire_tour_and_load(demo, page, rp, tour_text, tour_btn, tour_idx)
    hide_page_handlers(demo)
    return demo


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


def wire_runs(page, rp: RunParts, sweep_point, sweep_open) -> None:
    c, v = rp.controls, rp.views

    async def on_run(box, prev, prompt_v, model_v, decoder_v, *values):
        parse = lambda: (decoder_v, share.from_controls(c.keys, decoder_v, values))  # noqa: E731
        async for out in run_setting(page, rp, parse, prompt_v, model_v, None, box, prev, set_controls=False):
            yield out

    inputs = [v.tab, rp.previous, c.prompt, c.model, c.decoder, *c.components]
    c.run.click(on_run, inputs, rp.outputs, **model_run(rp))
    for comp in c.components:  # changing a decoding parameter re-runs on release (cached runs return at once)
        if isinstance(comp, gr.Slider):
            comp.release(on_run, inputs, rp.outputs, **model_run(rp))

    async def open_point(box, prev, spec, prompt_v, model_v):
        """A sweep setting, decoded on the current prompt into the main views."""
        if not spec or not isinstance(spec, str):
            raise shown_error("choose a setting first")
        async for out in run_setting(page, rp, lambda: parse_spec(spec), prompt_v, model_v, None, box, prev):
            yield out

    sweep_open.click(open_point, [v.tab, rp.previous, sweep_point, c.prompt, c.model], rp.outputs, **model_run(rp))


def wire_tour_and_load(demo, page, rp: RunParts, tour_text, tour_btn, tour_idx) -> None:
    c, v = rp.controls, rp.views

    def next_stop(i, prev):
        i, text, ex, s = tour.tour_next(page, i)
        return {tour_idx: i, tour_text: text, **show_trace(page, rp, ex, s, prev, example=True)}

    tour_btn.click(next_stop, [tour_idx, rp.previous], [tour_idx, tour_text, *rp.outputs], show_progress="hidden")
    autorun, step_from_url = gr.State(False), gr.State(None)

    def load(request: gr.Request):  # a plain function: gradio injects the request by its annotation
        values, run = share.url_values(page, request)
        out = {c.prompt: values.get("prompt", gr.skip()), c.model: values.get("model", gr.skip()),
               c.decoder: values.get("decoder", gr.skip()), autorun: run, step_from_url: values.get("step")}
        out.update({comp: values[k] for k, comp in c.values.items() if k in values})
        example = page.example_traces.get(values.get("decoder", "threshold")) if not run else None
        if example is not None:   # a pre-baked run, shown before any model call
            out.update(show_trace(page, rp, example, None, None, example=True))
        return out

    async def maybe_run(go, step_v, box, prev, prompt_v, model_v, decoder_v, *values):
        if not go:
            yield {rp.trace: gr.skip()}
            return
        parse = lambda: (decoder_v, share.from_controls(c.keys, decoder_v, values))  # noqa: E731
        async for out in run_setting(page, rp, parse, prompt_v, model_v, step_v if isinstance(step_v, int) else None,
                                     box, prev):
            yield out

    demo.load(load, None, [autorun, step_from_url, *rp.outputs]) \
        .then(maybe_run, [autorun, step_from_url, v.tab, rp.previous, c.prompt, c.model, c.decoder, *c.components],
              rp.outputs, **model_run(rp))


def launch_kwargs() -> dict:
    return dict(css=CSS_PATH.read_text() if CSS_PATH.exists() else None)
