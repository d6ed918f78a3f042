"""Branch here: from the step shown, force a token at the selected position or change the decoder from there on,
and see the two futures side by side (``engine.runtime.branch``; the views in ``explorer.views.branch``)."""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from urllib.parse import urlencode

import gradio as gr
import numpy as np

from engine.runtime.branch import Branch, branch_json, canvas_after
from engine.errors import UserError
from explorer.page import fair
from explorer.page.context import Page, failed_panel, fairly, shown_error
from explorer.page.share import query_for
from explorer.page.worker import DrawClock, follow, in_thread
from explorer.scrub import fmt
from explorer.views.branch import branch_maps, branch_summary

EST_DRAW_S = 0.2   # drawing a branch's summary and its two maps (a 256-forward run on this 2-core CPU: ~0.1 s)
WHERE = ("<p class='um-branch-where'>Pick a step on the scrubber (and a position in the text), then press "
         "Branch here.</p>")


@dataclass
class BranchParts:
    point: gr.State          # {"step": s, "pos": p or None}: the branch point chosen
    where: gr.HTML
    force: gr.Radio          # the selected position's candidates at the step
    token: gr.Textbox        # or any token of the vocabulary
    spec: gr.Textbox         # the decoder from there on
    go: gr.Button
    out: gr.HTML
    figs: tuple


def build_branch() -> BranchParts:
    gr.Markdown("What if? From a step of the run shown, force a token at a masked position, or change the decoder "
                "from there on; the two futures are shown side by side, their shared steps shaded.")
    point = gr.State(None)
    where = gr.HTML(WHERE, elem_id="branch-where")
    force = gr.Radio([], label="force this candidate at the selected position", elem_id="branch-force")
    with gr.Row():
        token = gr.Textbox(label="or any token of the vocabulary", max_lines=1, elem_id="branch-token")
        spec = gr.Textbox(label="decoder from here on (SPEC; empty = the same)", max_lines=1, elem_id="branch-spec",
                          placeholder="edit:tau=0.7")
    go = gr.Button("Run the branch", elem_id="branch-run")
    out = gr.HTML(elem_id="branch-out")
    with gr.Row():
        figs = (gr.Plot(label="this run: mask state"), gr.Plot(label="the branch: mask state"))
    return BranchParts(point, where, force, token, spec, go, out, figs)


def choose_point(tr, box) -> tuple:
    """The branch point: the scrubber's step and selected position, and that position's candidates if it is still
    masked after the step. (point, where, force radio)."""
    if tr is None or not tr.records:
        raise shown_error("run a decode first: a branch starts from a step of the run shown")
    box = box if isinstance(box, dict) else {}
    n = len(tr.records)
    step = box.get("step") if isinstance(box.get("step"), int) else n
    step = min(max(step, 0), n)
    pos, m = box.get("pos"), tr.meta
    choices, note = [], "no position selected: the branch can change the decoder"
    if isinstance(pos, int) and m.prompt_len <= pos < m.gen_end:
        if canvas_after(tr, step)[pos] == m.mask_token_id:
            at, choices = proposals(tr, step, pos)
            nxt = min(step, n - 1) + 1
            note = (f"position {pos}, still masked: force one of the candidates forward {at + 1} proposed for it, "
                    "or type a token" if choices else
                    f"position {pos}, still masked, is outside the block forward {nxt} scores and no forward "
                    "before it scored it, so it has no candidates yet: type a token to force it")
        else:
            note = f"position {pos} is already decoded after step {step}: select a masked one to force a token"
    else:
        pos = None
    where = f"<p class='um-branch-where'>Branch after step {step} of {n}; {note}.</p>"
    return {"step": step, "pos": pos}, where, gr.Radio(choices=choices, value=None)


def proposals(tr, step: int, pos: int) -> tuple[int, list]:
    """A masked slot's candidates at the branch point, as (0-based forward, radio choices): the forward after the
    point's, else the latest forward before it that scored the slot (S2D2's and SimSD's verify forwards record no
    candidates); (-1, []) where none did (a block not reached yet)."""
    m = tr.meta
    for i in range(min(step, len(tr.records) - 1), -1, -1):
        rec = tr.records[i]
        ids, at = rec.topk.topk_ids, np.flatnonzero(rec.positions == pos)
        if ids is None or not len(at) or not (ids[at[0]] >= 0).any():
            continue
        # one formatter with the candidates panel (per-mille, three digits)
        return i, [(f"{m.vocab.get(str(int(t)), '?')}  ({fmt(int(round(float(q) * 1000)), 3)})", str(int(t)))
                   for t, q in zip(ids[at[0]], rec.topk.topk_p[at[0]]) if t >= 0]
    return -1, []


# the step and selected position the scrubber shows, read in the browser (they reach the server otherwise only
# when a view the server draws is open)
HERE_JS = ("(tr, box, s, p) => { const u = window.__umScrub; "
           "return [tr, box, u ? u.step : s, u ? (u.sel === null ? -1 : u.sel) : p]; }")


# the result of Branch here, or of a link's branch, is far below the scrubber: bring it into sight
# (after the tab that holds it has been drawn: its text is empty while the tab is hidden)
SHOW_JS = ("(...a) => { setTimeout(() => { const e = document.getElementById('{id}'); "
           "if (e && e.innerText.trim()) e.scrollIntoView({block: 'start', behavior: 'instant'}); }, 150); "
           "return a; }")


def show_js(elem_id: str) -> str:
    return SHOW_JS.replace("{id}", elem_id)


def open_branch(tr, box, step, pos, tabs_id: str):
    """The branch panel opened at the scrubber's step and position (the browser's, else the last settled)."""
    here = dict(box) if isinstance(box, dict) else {}
    for key, value in (("step", step), ("pos", pos)):
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value and abs(value) < 1e9:
            here[key] = int(value) if value >= 0 else None      # -1: no position selected
    point, where, radio = choose_point(tr, here)
    return point, where, radio, gr.Tabs(selected=tabs_id)


async def run_branch(page: Page, tr, point, force_v, token_v, spec_v, started: float | None = None):
    """Runs in a worker (``follow``), bounded by the request budget, drawing included (from ``started``, when the
    request began before it: a link's base run); yields (summary, map A, map B)."""
    try:
        if tr is None or not isinstance(point, dict):
            raise UserError("press Branch here first: it takes the step and position shown")
        model = page.check_model(tr.meta.model)
        force = None
        if isinstance(token_v, str) and token_v.strip():
            force = await in_thread(page.service.token_id, model, token_v)
        elif isinstance(force_v, str) and force_v.isascii() and force_v.isdigit():
            force = int(force_v)
        if force is not None and point.get("pos") is None:
            raise UserError("select a masked position in the text to force a token there")
        spec = spec_v.strip() if isinstance(spec_v, str) and spec_v.strip() else None
        branch = {"step": point["step"], "force": [point["pos"], force] if force is not None else None, "spec": spec}
        produce = lambda should_stop: page.service.branch_from(  # noqa: E731
            tr, branch, model, page=True, client=fair.client(), should_stop=should_stop)
        last, clock = None, DrawClock(page.service.max_seconds, EST_DRAW_S)     # drawn once, at the end
        async for f in follow(produce, page.service.max_seconds, started=started, reserve=clock.reserve):
            last = f.value if f.value is not None else last
            if f.final and last is not None:
                if f.limit:
                    gr.Warning(f.limit)
                yield await clock.draw(view, page, tr, last)
            elif f.final and f.limit:             # the budget ran out before the branch's first forward
                raise UserError(f"the branch did not start: {f.limit}")
    except UserError as e:          # in the panel, the previous branch cleared (``failed_panel``)
        yield failed_panel("The branch", e), None, None


def view(page: Page, base, branch) -> tuple:
    b = branch.meta.branch
    link = query_for(page, base) + "&" + urlencode({"branch": branch_json(
        Branch(b["step"], tuple(b["force"]) if b["force"] else None), b["spec"] or None)})
    share = (f"<p class='um-branch-link'>Link to both futures: <a href='?{html.escape(link)}'>"
             f"{html.escape('?' + link)[:160]}…</a></p>")
    return (branch_summary(base, branch, page.verdict(base), page.verdict(branch)) + share,
            *branch_maps(base, branch))


async def from_link(page: Page, tr, branch_value, started: float | None = None):
    """A link's branch (``?...&branch=...``), once its base run is shown: decoded into the Branch tab."""
    if not branch_value or tr is None or not tr.records:
        yield (gr.skip(),) * 4
        return
    how = json.loads(branch_value)                  # checked when the link was read (explorer.state)
    point = {"step": how["step"], "pos": how["force"][0] if how.get("force") else None}
    async for out in run_branch(page, tr, point, str(how["force"][1]) if how.get("force") else None, "",
                                how.get("spec") or "", started):
        yield (*out, gr.Tabs(selected="branch"))


def wire_branch(page: Page, parts: BranchParts, here: gr.Button, tr_state, box_state, tabs, tabs_id: str,
                model_run: dict) -> None:
    step, pos = gr.Number(visible=False), gr.Number(visible=False)
    here.click(lambda tr, box, s, p: open_branch(tr, box, s, p, tabs_id), [tr_state, box_state, step, pos],
               [parts.point, parts.where, parts.force, tabs], js=HERE_JS, show_progress="hidden") \
        .then(None, js=show_js("branch-where"))

    async def on_branch(request: gr.Request, tr, point, force_v, token_v, spec_v):
        async for out in fairly(page, "branch", request, run_branch(page, tr, point, force_v, token_v, spec_v)):
            yield out

    parts.go.click(on_branch, [tr_state, parts.point, parts.force, parts.token, parts.spec],
                   [parts.out, *parts.figs], **model_run)
