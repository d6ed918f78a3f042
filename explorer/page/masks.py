"""Masks: the attention masks the engine builds (``engine.models.masks``), for any block size and span."""

from __future__ import annotations

import gradio as gr

from engine.errors import UserError
from explorer.page.context import shown_error, slider_number

from explorer.page.decode_tab import note
from explorer.views import mask_explorer as mask_explorer_view
from explorer.views.mask_explorer import B_MAX, KINDS, mask_explorer


def build_masks() -> None:
    gr.Markdown("The attention masks the engine builds (from `engine.models.masks`), for any block size and span.")
    with gr.Row():
        kind = gr.Radio(list(KINDS), value="2L verifier", label="pattern")
        B = gr.Slider(1, B_MAX, value=4, step=1, label="block size B")
        start = gr.Slider(0, B_MAX - 1, value=1, step=1, label="span start (first masked index)")
        length = gr.Slider(1, B_MAX, value=2, step=1, label="span length")
    fig = gr.Plot(value=mask_explorer("2L verifier", 4, 1, 2), label="mask")
    note(mask_explorer_view)
    for c in (kind, B, start, length):
        c.change(draw, [kind, B, start, length], fig, show_progress="hidden")


def draw(kind, B, start, length):
    if not isinstance(kind, str) or kind not in KINDS:
        raise shown_error(f"pattern must be one of {', '.join(KINDS)}")
    try:
        b = slider_number(B, "block size", 1, B_MAX)
        start_v = min(slider_number(start, "span start", 0, B_MAX - 1), b - 1)
        length_v = slider_number(length, "span length", 1, B_MAX)
    except UserError as e:
        raise shown_error(e) from None
    return mask_explorer(kind, b, start_v, length_v)
