"""Outputs a message leaves alone cost nothing on the event loop (issue 74, point 4; ``explorer.page.untouched``):
the page's Run event has over a hundred outputs and a streamed frame sets three or four; gradio 6.31 built a new
component for each of the others, on the event loop, only to send an empty update (~1 s of CPU per Run)."""

from __future__ import annotations

import asyncio

import gradio as gr
import plotly.graph_objects as go
import pytest
from gradio.blocks import Blocks
from gradio.components.base import Component
from gradio.state_holder import SessionState

from engine.harness.service import DecodeService
from explorer.export_dir import ExportDir
from explorer.layout import build_demo
from explorer.page.context import Page
from explorer.page.untouched import EMPTY


@pytest.fixture(scope="module")
def run_event(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("untouched")
    page = Page(DecodeService(default_model="tiny", max_seconds=30), {}, export_dir=ExportDir(str(tmp)),
                models=("tiny",))
    demo = build_demo(page)
    fn = next(f for f in demo.fns.values() if f.name == "maybe_run")      # a link's run: it sets the controls too
    by_id = {getattr(c, "elem_id", None): c for c in fn.outputs}
    plot = next(c for c in fn.outputs if isinstance(c, gr.Plot))
    # a streamed frame, a finished run's first piece (a prop update among them), one skipped output, and one
    # gr.skip() for every output
    messages = [{by_id["summary"]: "<p>s</p>", by_id["text"]: "<p>t</p>", plot: go.Figure(go.Bar(y=[1, 2])),
                 by_id["run-data"]: ""},
                {by_id["summary"]: "<p>s</p>", by_id["view-tabs"]: gr.Tabs(selected="Decode"), plot: gr.skip()},
                gr.skip()]
    return demo, fn, messages


def postprocessed(post, fn, demo, messages) -> list:
    async def go_():
        state = SessionState(demo)
        return [await post(fn, dict(m) if isinstance(m, dict) and m != EMPTY else m, state) for m in messages]
    return asyncio.run(go_())


def plain(value):
    """gradio's own empty update of a gr.HTML carries its type twice (``props``): the browser reads it as none."""
    return EMPTY if value == {"props": EMPTY, **EMPTY} else value


def test_a_message_builds_only_the_components_it_updates(run_event, monkeypatch):
    """Postprocessing a frame, a finished run's piece and a skip of a Run with 100+ outputs builds one component
    (the tabs' update): before, gradio built one per output left alone, 360 here."""
    demo, fn, messages = run_event
    assert len(fn.outputs) > 100
    built = []
    real = Component.__init__

    def counted(self, *a, **k):
        built.append(type(self).__name__)
        real(self, *a, **k)
    monkeypatch.setattr(Component, "__init__", counted)
    postprocessed(demo.postprocess_data, fn, demo, messages)
    assert len(built) <= 1, built[:8]


def test_what_is_sent_is_what_gradio_sends(run_event):
    """Every output of every message as gradio's own postprocessing gives it (an empty update for the ones left
    alone, None for a gr.State), the figure and the HTML included."""
    demo, fn, messages = run_event
    ours = postprocessed(demo.postprocess_data, fn, demo, messages)
    theirs = postprocessed(Blocks.postprocess_data.__get__(demo), fn, demo, messages)
    assert [[plain(v) for v in m] for m in ours] == [[plain(v) for v in m] for m in theirs]
    assert sum(v != EMPTY for v in ours[0]) >= 4                # the frame's values are there
