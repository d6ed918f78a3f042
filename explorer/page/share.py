"""Share and export: the link to a run (its query string), export files, SVG of the visible figures, and the page
load that restores a run from the URL (or shows a pre-baked example before any model call)."""

from __future__ import annotations

import html
from dataclasses import dataclass

import gradio as gr

from engine import catalogue
from engine.errors import UserError
from explorer.page.context import Page, js, shown_error
from explorer.page.decode_tab import decode, views_at
from explorer.page.controls import decoder_params
from explorer.state import parse_query, to_query


@dataclass
class Share:
    link: gr.Textbox
    export: gr.File
    svg: gr.Button
    gif: gr.Button
    gif_file: gr.File


def build_share() -> Share:
    with gr.Row():
        link = gr.Textbox(label="Link to this run (query string)", interactive=False, buttons=["copy"],
                          elem_id="link", scale=3)
        svg = gr.Button("Visible figures as SVG", size="sm", elem_id="svg", scale=1)
        gif = gr.Button("Animated GIF of the run", size="sm", elem_id="gif", scale=1)
    export = gr.File(label="Export: JSON · CSV · npz", file_count="multiple", elem_id="export",
                     elem_classes=["um-export"])
    gif_file = gr.File(label="GIF (made on request: it takes a while for long runs)", elem_id="gif-file",
                       elem_classes=["um-export"])
    return Share(link, export, svg, gif, gif_file)


def from_controls(keys, prompt_v, model_v, decoder_v, values):
    """(decoder params, link query) from the page's control values. The link names only what differs from the
    decoder's defaults, so it stays short and reads as the setting."""
    params = decoder_params(decoder_v, dict(zip(keys, values)))
    defaults = {k: p.default for k, p in catalogue.params_of(decoder_v).items()} if decoder_v in catalogue.DECODERS \
        else {}
    changed = {k: v for k, v in params.items() if defaults.get(k) != v}
    return params, to_query(dict(changed, prompt=prompt_v, decoder=decoder_v, model=model_v))


def on_load(page: Page, keys, n_views: int, request: gr.Request):
    """Restore controls from the URL; show a pre-baked example at once (before any model call)."""
    values, problems = parse_query(dict(request.query_params) if request else {}, page.models)
    if problems:  # the message is the visitor's own text: escaped, never rendered as HTML
        gr.Warning(html.escape("Ignored in the link: " + "; ".join(problems)[:600]))
    updates = [gr.update(value=values[k]) if k in values else gr.skip() for k in ("prompt", "model", "decoder")]
    updates += [gr.update(value=values[k]) if k in values else gr.skip() for k in keys]
    autorun = any(k != "step" for k in values)
    example = page.example_traces.get(values.get("decoder", "threshold")) if not autorun else None
    shown = views_at(page, example, None) if example is not None else tuple(gr.skip() for _ in range(n_views))
    n = len(example.records) if example is not None else 0
    return (*updates, autorun, values.get("step"), *shown, example if example is not None else gr.skip(),
            gr.update(maximum=max(2, n), value=n) if n else gr.skip())


async def maybe_run(page: Page, keys, n_views: int, autorun, step_v, prompt_v, model_v, decoder_v, *values):
    if not autorun:
        yield tuple(gr.skip() for _ in range(n_views + 5))
        return
    try:
        params, query = from_controls(keys, prompt_v, model_v, decoder_v, values)
    except UserError as e:
        raise shown_error(str(e)) from None
    async for out_v in decode(page, n_views, prompt_v, model_v, decoder_v, params, query,
                              int(step_v) if step_v else None):
        yield out_v


def wire_share(page: Page, share: Share, trace_state) -> None:
    share.svg.click(None, None, None, js=js("svg_export.js"))
    share.gif.click(lambda tr: make_gif(page, tr), trace_state, share.gif_file, concurrency_id="gif",
                    concurrency_limit=1)


def make_gif(page: Page, tr):
    """The GIF of the run shown (a few seconds for a long run, so only when asked, one at a time)."""
    if tr is None or page.export_dir is None:
        raise shown_error("run a decode first")
    return page.export_dir.write_gif(tr)
