"""Playback: the step slider with ◀ / ▶ / play beside it, the selected position, and clicks on tokens and cells.

A finished run is a stored trace: every handler here re-renders the views from it, without a model call.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import gradio as gr

from explorer.page.context import js
from explorer.page.decode_tab import views_at
from explorer.render import VIEWS

N_OUTPUTS = 1 + len(VIEWS)   # the summary and every view


@dataclass
class Playback:
    step: gr.Slider
    position: gr.Dropdown
    prev: gr.Button
    play: gr.Button
    next: gr.Button
    clicks: gr.HTML          # heatmap cells report clicks through this element (gr.Plot has no click event)
    timer: gr.Timer
    playing: gr.State


def build_playback() -> Playback:
    with gr.Row(equal_height=True):
        prev = gr.Button("◀", size="sm", elem_id="prev", scale=0, min_width=44)
        play = gr.Button("▶ / ❚❚", size="sm", elem_id="play", scale=0, min_width=70)
        nxt = gr.Button("▶", size="sm", elem_id="next", scale=0, min_width=44)
        step = gr.Slider(1, 2, value=1, step=1, label="Step (scrub a finished run)", elem_id="step", scale=4)
        position = gr.Dropdown([], value=None, label="Position", elem_id="position", scale=1,
                               allow_custom_value=True)
    clicks = gr.HTML("", js_on_load=js("click_plot.js"), elem_id="plot-clicks")
    return Playback(step, position, prev, play, nxt, clicks, gr.Timer(0.5, active=False), gr.State(False))


def on_step(page, tr, s, pos):
    if tr is None:
        return tuple(gr.skip() for _ in range(N_OUTPUTS))
    selected = int(pos) if pos not in (None, "") and str(pos).lstrip("-").isdigit() else None
    return views_at(page, tr, int(s) - 1, selected)


def move(tr, s, delta: int):
    if tr is None:
        return gr.skip()
    return int(min(max(1, int(s) + delta), len(tr.records)))


def toggle(is_playing, tr, s):
    start = not is_playing and tr is not None
    rewind = start and int(s) >= len(tr.records)
    return start, gr.Timer(active=start), (1 if rewind else gr.skip())


def tick(tr, s, is_playing):
    if tr is None or not is_playing or int(s) >= len(tr.records):
        return gr.skip(), False, gr.Timer(active=False)
    return int(s) + 1, True, gr.skip()


def select_position(evt: gr.EventData):
    pos = getattr(evt, "pos", None)
    return int(pos) if pos is not None and str(pos).lstrip("-").isdigit() else gr.skip()


def wire_playback(page, pb: Playback, trace_state, text, outputs: list) -> None:
    quiet = dict(show_progress="hidden")
    render = partial(on_step, page)
    pb.step.change(render, [trace_state, pb.step, pb.position], outputs, **quiet)
    pb.position.change(render, [trace_state, pb.step, pb.position], outputs, **quiet)
    pb.prev.click(lambda tr, s: move(tr, s, -1), [trace_state, pb.step], pb.step, **quiet)
    pb.next.click(lambda tr, s: move(tr, s, +1), [trace_state, pb.step], pb.step, **quiet)
    pb.play.click(toggle, [pb.playing, trace_state, pb.step], [pb.playing, pb.timer, pb.step], **quiet)
    pb.timer.tick(tick, [trace_state, pb.step, pb.playing], [pb.step, pb.playing, pb.timer], **quiet)
    text.click(select_position, None, pb.position, **quiet)
    pb.clicks.click(select_position, None, pb.position, **quiet)
