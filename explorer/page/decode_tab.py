"""The decode: summary, text, candidates and the view tabs, and the handlers that stream a run into them.

A run streams forward by forward (or comes at once from the trace cache); when it ends, the step slider, the
position list, the link and the export files follow. Only ``UserError`` becomes a message in the page: any other
exception is a bug and stays one.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

import gradio as gr

from engine import __version__ as ENGINE_VERSION
from engine.errors import UserError
from explorer.glossary import how_to_read
from explorer.grid import Grid
from explorer.page.context import Page, js, shown_error
from explorer.page.worker import follow, in_thread
from explorer.render import render_all
from explorer.store import canonical_key
from explorer.views import attention, candidates, ce_maps, heatmaps, reasons, router, simsd, summary, text, \
    trajectory, verifier


@dataclass
class Views:
    summary: gr.HTML
    delta: gr.HTML
    text: gr.HTML
    candidates: gr.HTML
    plots: list             # in explorer.render.VIEWS order, after text and before candidates

    @property
    def outputs(self) -> list:
        """The components render_all fills, in its order."""
        return [self.summary, self.text, *self.plots, self.candidates]


def note(module) -> None:
    """A collapsed "how to read this" under a view, taken from the view module's docstring."""
    with gr.Accordion("How to read this", open=False):
        gr.Markdown(how_to_read(module))


def build_summary() -> tuple:
    s = gr.HTML(elem_id="summary")
    delta = gr.HTML(elem_id="delta")
    note(summary)
    txt = gr.HTML(elem_id="text", js_on_load=js("click_token.js"))
    note(text)
    return s, delta, txt


def build_view_tabs(s, delta, txt) -> Views:
    cand = gr.HTML(elem_id="candidates")
    note(candidates)
    with gr.Tabs():
        with gr.Tab("Decode"):
            mask = gr.Plot(label="Mask state", elem_id="mask-plot")
            conf = gr.Plot(label="Confidence", elem_id="conf-plot")
            ent = gr.Plot(label="Entropy", elem_id="entropy-plot")
            note(heatmaps)
            reason = gr.Plot(label="Commit reasons", elem_id="reason-plot")
            note(reasons)
        with gr.Tab("S2D2"):
            ver = gr.Plot(label="Verifier map", elem_id="verifier-plot")
            note(verifier)
            rout = gr.Plot(label="Router timeline", elem_id="router-plot")
            note(router)
            attn = gr.Plot(label="Attention mask of the step", elem_id="attn-plot")
            note(attention)
        with gr.Tab("SimSD"):
            sim = gr.Plot(label="Reveal order and verdicts", elem_id="simsd-plot")
            note(simsd)
            gr.Markdown("The round's temporal mask is the attention view in the S2D2 tab.")
        with gr.Tab("TSPD + CE"):
            gr.Markdown("*PROPOSED: our reconstruction of TSPD + CE; the paper's method section was not available.*")
            traj = gr.Plot(label="Trajectories and forecast fan", elem_id="traj-plot")
            note(trajectory)
            ce = gr.Plot(label="Forecast LCB, horizon, class", elem_id="ce-plot")
            note(ce_maps)
    return Views(s, delta, txt, cand, [mask, conf, ent, reason, ver, rout, attn, sim, traj, ce])


def views_at(page: Page, trace, step: int | None, selected: int | None = None) -> tuple:
    return render_all(trace, step, page.verdict(trace), selected)


def finished(page: Page, n_views: int, tr, query: str | None, step_v: int | None = None):
    """Views at step_v (the last step by default), the slider, positions, link and export files of a finished
    trace. The stream shows intermediate frames only, so the finished trace is always drawn here, once."""
    n = max(1, len(tr.records))
    s = n if step_v is None else min(max(1, step_v), n)
    views = views_at(page, tr, s - 1 if step_v is not None else None)
    if tr.meta.get("limit"):
        gr.Warning(tr.meta["limit"])
    return (*views, tr, gr.update(maximum=max(2, n), value=s),
            gr.update(choices=[int(p) for p in Grid.of(tr).positions], value=None),
            query if query is not None else gr.skip(),
            page.export_dir.write(tr) if page.export_dir else None)


def frame(page: Page, tr) -> tuple:
    """What a streaming run shows between forwards: every view at the newest forward, and the slider there."""
    n = max(1, len(tr.records))
    return (*views_at(page, tr, None), tr, gr.update(maximum=max(2, n), value=n), gr.skip(), gr.skip(), gr.skip())


async def decode(page: Page, n_views: int, prompt_v, model_v, decoder_v, params, query, step_v):
    """Stream a decode into the views (or take it from the trace cache), then finish the page. The engine runs in
    a worker (``follow``): the page shows its newest forward a few times a second, a cancelled request stops it,
    and the request's wall time, rendering included, is bounded by the service's budget."""
    key, last, t0 = None, None, time.monotonic()
    run_id = uuid.uuid4().hex[:12]     # marks every frame of this run in the page (the text view's data-run)
    try:
        model = page.check_model(model_v)
        if page.store is not None:
            key = canonical_key(model=page.service.model_id(model), prompt=page.service.check_prompt(prompt_v),
                                decoder=decoder_v, params=params, engine=ENGINE_VERSION)
            hit = await in_thread(page.store.get, key)
            if hit is not None:  # decoded before: explore at once, no model call
                hit.meta.update(run_id=run_id, finished=True)
                yield await in_thread(finished, page, n_views, hit, query, step_v)
                return
        produce = lambda should_stop: page.service.stream(prompt_v, decoder_v, params, model, page=True)  # noqa
        async for f in follow(produce, page.service.max_seconds, started=t0):
            last = f.value
            if last is None:
                continue
            last.meta.update(run_id=run_id, finished=f.final)
            if f.limit:
                last.meta["limit"] = f.limit
            if not f.final:
                yield await in_thread(frame, page, last)
    except UserError as e:  # shown to this visitor; the server goes on
        raise shown_error(str(e)) from None
    if last is not None:
        if page.store is not None and not last.meta.get("limit"):
            page.store.put(key, last)   # run_id and finished are set again on every hit
        yield await in_thread(finished, page, n_views, last, query, step_v)


def update_delta(tr, prev):
    """After a run: how it compares with the previous one (kept for comparison), then remember it."""
    if tr is None:
        return gr.skip(), prev
    if prev is None or prev is tr:
        return "", tr
    return summary.previous_delta(tr, prev), tr
