"""Share and export: the link's query for the run shown, export files, SVG of the visible figures, the GIF, and the
values a URL asks for."""

from __future__ import annotations

import html
from dataclasses import dataclass

import gradio as gr

from engine.catalogue import catalogue
from explorer.page.context import Page, js, shown_error
from explorer.page import presence
from explorer.page.controls import decoder_params
from explorer.state import parse_query, to_query


@dataclass
class Share:
    export: gr.File
    svg: gr.Button
    gif: gr.Button
    gif_file: gr.File


def build_share() -> Share:
    """Export files and figure downloads; the link to the run shown lives in the scrubber (it follows the step)."""
    with gr.Row():
        svg = gr.Button("Visible figures as SVG", size="sm", elem_id="svg", scale=1)
        gif = gr.Button("Animated GIF of the run", size="sm", elem_id="gif", scale=1)
    export = gr.File(label="Export of the run shown: JSON · CSV · npz", file_count="multiple", elem_id="export",
                     elem_classes=["um-export"])
    gif_file = gr.File(label="GIF (made on request: it takes a while for long runs)", elem_id="gif-file",
                       elem_classes=["um-export"])
    return Share(export, svg, gif, gif_file)


def from_controls(keys, decoder_v, values) -> dict:
    """The chosen decoder's parameters from the page's control values."""
    return decoder_params(decoder_v, dict(zip(keys, values)))


def query_for(page: Page, tr) -> str:
    """The link's query for a trace: what differs from its decoder's defaults, the prompt and the model (by the
    name the page offers it under), so the link reads as the setting and reproduces the run."""
    m = tr.meta
    decoder = m.decoder
    name = next((k for k, t in getattr(page, "recorded", {}).items() if t is tr), None)
    if name is not None:                      # one of the operator's recorded traces: its name opens it again
        return to_query({"trace": name})
    defaults = {k: p.default for k, p in catalogue.params_of(decoder).items()} if decoder in catalogue.DECODERS \
        else {}
    changed = {k: v for k, v in m.params.items() if k in defaults and defaults[k] != v}
    model = m.model if m.model in page.models else page.default_model
    return to_query(dict(changed, prompt=m.prompt, decoder=decoder, model=model))


def url_values(page: Page, request) -> tuple[dict, bool]:
    """Control values from the URL (problems shown as a warning) and whether they ask for a run."""
    values, problems = parse_query(dict(request.query_params) if request else {}, page.models)
    if "trace" in values and values["trace"] not in page.recorded:     # a stale link: not another run as if it
        problems.append(f"trace={values.pop('trace')[:40]!r} is not offered here")
    if problems:  # the message is the visitor's own text: escaped, never rendered as HTML
        gr.Warning(html.escape("In the link: " + "; ".join(problems)[:600]))
    return values, any(k not in ("step", "pos", "branch", "tab", "trace") for k in values)


def wire_share(page: Page, share: Share, trace_state) -> None:
    share.svg.click(None, None, None, js=js("svg_export.js"))
    def on_gif(tr, request: gr.Request):
        return make_gif(page, tr, request)
    share.gif.click(on_gif, trace_state, share.gif_file, concurrency_id="gif", concurrency_limit=1)


def make_gif(page: Page, tr, request=None):
    """The GIF of the run shown (a few seconds for a long run, so only when asked, one at a time); drawing stops
    between two frames once its visitor has left (``explorer.page.presence``)."""
    if tr is None or page.export_dir is None:
        raise shown_error("run a decode first")
    budget = getattr(page.service, "max_seconds", None)
    here = presence.watch(page.gate.streams, getattr(request, "session_hash", None))
    return page.export_dir.write_gif(tr, budget, should_stop=lambda: not here())
