"""The Gradio page, wired from its parts (``explorer.page``): controls on the left, the live decode on the right,
the step slider with its playback buttons under the text, tabs for the views, Compare, Sweep, Masks, the glossary
and the tour. This module only connects components to handlers; the page never touches torch."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import gradio as gr

from explorer.glossary import GLOSSARY
from explorer.page import compare, controls, decode_tab, masks, playback, share, sweep, tour
from explorer.page.api import register_api
from explorer.page.context import Page, shown_error
from engine.errors import UserError
from engine.spec import parse_spec

CSS_PATH = Path(__file__).resolve().parent.parent / "assets" / "style.css"
MODEL = dict(concurrency_id="model", concurrency_limit=1)


def build_demo(page: Page) -> gr.Blocks:
    # delete_cache: gradio keeps its own copy of every returned file (exports); drop those older than 30 min
    with gr.Blocks(title="Unmask — see how diffusion LMs decode", delete_cache=(600, 1800)) as demo:
        gr.Markdown("# Unmask\nWatch a diffusion language model unmask its answer, forward by forward: which "
                    "positions are still masked, how confident each candidate is, and what each decoder commits.")
        trace_state, previous = gr.State(None), gr.State(None)
        with gr.Row():
            with gr.Column(scale=1, min_width=320):
                c = controls.build_controls(page)
            with gr.Column(scale=2):
                summary, delta, text = decode_tab.build_summary()
                pb = playback.build_playback()
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
        wire(demo, page, c, views, pb, sh, trace_state, previous, (tour_text, tour_btn, tour_idx),
             (sweep_point, sweep_open))
    hide_page_handlers(demo)
    return demo


def hide_page_handlers(demo: gr.Blocks) -> None:
    """Only ``decode`` is meant for clients: every page handler is left out of the API listing ("undocumented").
    Making them "private" would not make them safer, as gradio's server still answers any handler by its index, so
    each validates its own inputs; undocumented keeps them reachable to this repository's load tests."""
    for fn in demo.fns.values():
        if fn.api_name != "decode":
            fn.api_visibility = "undocumented"


def wire(demo, page, c, views, pb, sh, trace_state, previous, tour_parts, sweep_parts) -> None:
    out = views.outputs
    n = len(out)
    run_outputs = [*out, trace_state, pb.step, pb.position, sh.link, sh.export]
    controls.wire_controls(page, c)
    playback.wire_playback(page, pb, trace_state, views.text, out)
    share.wire_share(page, sh, trace_state)

    async def on_run(prompt_v, model_v, decoder_v, *values):
        try:
            params, query = share.from_controls(c.keys, prompt_v, model_v, decoder_v, values)
        except UserError as e:
            raise shown_error(str(e)) from None
        async for out_v in decode_tab.decode(page, n, prompt_v, model_v, decoder_v, params, query, None):
            yield out_v

    def wire_run(trigger):
        evt = trigger(on_run, [c.prompt, c.model, c.decoder, *c.components], run_outputs, **MODEL)
        evt.then(None, sh.link, None, js="(q) => { if (q) history.replaceState(null, '', '?' + q); }")
        evt.then(decode_tab.update_delta, [trace_state, previous], [views.delta, previous], show_progress="hidden")

    wire_run(c.run.click)
    for comp in c.components:  # changing a decoding parameter re-runs on release (cached runs return at once)
        if isinstance(comp, gr.Slider):
            wire_run(comp.release)

    async def open_point(spec, prompt_v, model_v):
        """A sweep setting, decoded on the current prompt into the main views."""
        if not spec or not isinstance(spec, str):
            raise shown_error("choose a setting first")
        try:
            name, params = parse_spec(spec)
        except UserError as e:
            raise shown_error(str(e)) from None
        async for out_v in decode_tab.decode(page, n, prompt_v, model_v, name, params, None, None):
            yield out_v

    sweep_point, sweep_open = sweep_parts
    sweep_open.click(open_point, [sweep_point, c.prompt, c.model], run_outputs, **MODEL)
    tour_text, tour_btn, tour_idx = tour_parts
    tour_btn.click(partial(tour.tour_next, page), tour_idx, [tour_idx, tour_text, trace_state, pb.step, *out],
                   show_progress="hidden")
    autorun, step_from_url = gr.State(False), gr.State(None)
    def load(request: gr.Request):  # a plain function: gradio injects the request by its annotation
        return share.on_load(page, c.keys, n, request)

    demo.load(load, None,
              [c.prompt, c.model, c.decoder, *c.components, autorun, step_from_url, *out, trace_state, pb.step]) \
        .then(partial(share.maybe_run, page, c.keys, n), [autorun, step_from_url, c.prompt, c.model, c.decoder,
                                                          *c.components], run_outputs, **MODEL)


def launch_kwargs() -> dict:
    return dict(css=CSS_PATH.read_text() if CSS_PATH.exists() else None)
