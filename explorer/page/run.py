"""One current run: whatever shows a run (Run, a slider's release, Open from the Sweep, a link, the tour, the
example on load) goes through ``present``, so the controls, summary, delta, link, export and step all describe the
run shown, never an earlier one."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import gradio as gr

from engine.catalogue import catalogue
from engine.errors import UserError
from explorer import recorded
from explorer.page.context import Page, shown_error
from explorer.page.controls import decoder_choices
from explorer.page.decode_tab import Views, decode, finished
from explorer.page.worker import in_thread
from explorer.scrub import STOPPED


@dataclass
class RunParts:
    views: Views
    controls: object          # explorer.page.controls.Controls
    export: gr.File
    trace: gr.State           # the run shown
    previous: gr.State        # the run shown before it (the delta's reference)

    @property
    def run_outputs(self) -> list:
        """What a run made from the controls as they are writes (Run, a slider's release, a picked problem, Stop):
        not the controls. gradio's page marks an event's outputs (or its ``show_progress_on``) as loading at each of
        its steps and keeps refreshing them at every step of every later event, each found by a walk of the whole
        layout: the ninety controls, most of them hidden, were nine tenths of those walks."""
        return [*self.views.outputs, self.export, self.trace, self.previous]

    @property
    def outputs(self) -> list:
        """What a run that sets the controls to its own setting writes (a link, the tour, the Sweep's Open)."""
        return [*self.run_outputs, *self.setting]

    @property
    def setting(self) -> list:
        c = self.controls
        return [c.prompt, c.model, c.decoder, *c.components]


def controls_of(page: Page, c, tr, menu: bool = True) -> dict:
    """The controls set to the run's own setting (the preset is left alone: choosing one rewrites the others);
    ``menu``: the decoder's with the menu of the run's model (a uniform run's model has its own), else its value."""
    m = tr.meta
    out = {c.prompt: m.prompt}
    model = m.model if m.model in page.models else None
    if model:
        out[c.model] = model
    if m.decoder in catalogue.DECODERS:
        choices = decoder_choices(page.model_infos.get(model or page.default_model))
        out[c.decoder] = gr.Dropdown(choices=choices, value=m.decoder) if menu else m.decoder
    for k, v in m.params.items():
        if k in c.values and k != "preset":
            out[c.values[k]] = v
    return out


def shown_first(page: Page, values: dict):
    """The run a page load shows before any model call (None: none): the operator's recorded trace (the one the
    link names, else the first), else the pre-baked example of the link's decoder, the default's on a plain load."""
    return recorded.on_load(page, values) or page.example_traces.get(values.get("decoder", catalogue.DEFAULT_DECODER))


def start_at(page: Page, c, tr) -> None:
    """The controls' first values, as the page is built: the setting of ``tr``, the run a plain page load shows,
    so that the load itself writes no control (``RunParts.run_outputs``); None: the controls' defaults."""
    if tr is None:
        return
    for comp, v in controls_of(page, c, tr, menu=False).items():   # a component made here would be drawn here
        comp.value = comp.postprocess(v)
    c.decoder.choices = decoder_choices(page.model_infos.get(c.model.value))      # the opening model's menu


def final_parts(page: Page, rp: RunParts, tr, parts: dict, set_controls: bool = True) -> dict:
    """The finished run and what describes it. ``set_controls`` False: the run was made from the controls as they
    are (Run, a slider's release), so they already describe it and are not sent again (forty components redrawn
    in one browser task otherwise)."""
    return {**parts, rp.trace: tr, rp.previous: tr, **(controls_of(page, rp.controls, tr) if set_controls else {}),
            rp.export: page.export_dir.write(tr) if page.export_dir else None}


async def present(page: Page, rp: RunParts, stream, set_controls: bool = True):
    """Stream (trace, parts) pairs into the page: frames as they come, the finished run with everything that
    describes it."""
    described = None                      # the finished run whose description has been sent
    async for tr, parts in stream:
        if tr.meta.finished and described is not tr:
            described = tr
            # its export files are written off the event loop, charged to the visitor as its drawing is
            yield await in_thread(final_parts, page, rp, tr, parts, set_controls)
        else:
            yield {**parts, rp.trace: tr}


async def run_setting(page: Page, rp: RunParts, parse, prompt_v, model_v, step_v, box, prev,
                      set_controls: bool = True, session: str | None = None, budget_s: float | None = None,
                      started: float | None = None):
    """Decode a setting and present it. ``parse()`` gives (decoder, params) from what the visitor sent; its
    ``UserError`` becomes the page's one-line message. ``session``: the visitor's (the trace cache's scope);
    ``budget_s``: the run's share of the request's budget (default: all of it), counted from ``started`` (default:
    now)."""
    try:
        name, params = parse()
    except UserError as e:
        raise shown_error(str(e)) from None
    async for out in present(page, rp, decode(page, rp.views, prompt_v, model_v, name, params, step_v, box, prev,
                                            session, budget_s, started),
                             set_controls):
        yield out


def show_trace(page: Page, rp: RunParts, tr, step_v: int | None, prev, example: bool, box=None,
               set_controls: bool = True) -> dict:
    """A stored trace (the pre-baked example, a tour stop) as the run shown; with the page's tab box, drawn in
    the open tab (or the first with something to show). Its times are another moment's: the tile says cached."""
    if not tr.meta.cached:          # a pre-baked example is marked already: it is shared, and frozen
        tr.meta.cached = True
    return final_parts(page, rp, tr, finished(page, rp.views, tr, step_v, prev, example=example, box=box),
                       set_controls)


STOP_WAIT_S = 5.0    # how long Stop waits for the cancelled run's request to end (its worker stops at its next
#                      forward: a forward of the largest model is well under this)


async def show_stopped(page: Page, rp: RunParts, box, prev) -> dict:
    """Stop was pressed (gradio cancels the run's request): once that request has ended, the partial run it last
    showed becomes the run shown, finished as far as it went: its text says where it stopped and what it left
    undecided (``explorer.scrub.ended_line``), the slider scrubs its steps, the checker stays silent, and the next
    Run decodes again (``decode_tab.Live``). A run that had ended on its own, its final drawing cut by the cancel,
    is drawn as it ended. Nothing when no run was streaming (Stop on a finished run, or on one still waiting for the
    model)."""
    if not isinstance(box, dict):
        return {rp.trace: gr.skip()}
    t0 = time.monotonic()
    while box.get("live") and time.monotonic() - t0 < STOP_WAIT_S:
        await asyncio.sleep(0.02)
    # past the wait (a loaded machine ends the cancelled request's forward late) the last frame it drew is shown
    # all the same: gradio has cancelled that request, so nothing of it is drawn after this
    tr = box.pop("partial", None)
    if tr is None:
        return {rp.trace: gr.skip()}
    if not tr.meta.finished:     # else it ended on its own (its end or a limit) while its final drawing was cut
        box["fresh"] = True
        tr.meta.finished, tr.meta.limit = True, STOPPED
    return await in_thread(lambda: final_parts(page, rp, tr, finished(page, rp.views, tr, None, prev, box=box),
                                               set_controls=False))
