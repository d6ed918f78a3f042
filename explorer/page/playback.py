"""Playback in the browser: the step slider with ◀ / ▶ / play, the selected position and the run's link.

A finished run reaches the browser once (``explorer.scrub``); ``assets/js/scrub.js`` redraws the text and the
candidates and moves the figures' cursors itself. The server is asked only for the views it must draw again at a
new step (the registry's "server" views), once the step settles, and only for those that are visible.
"""

from __future__ import annotations

import gradio as gr

from explorer.page.context import js
from explorer.render import render_views
from explorer.state import KEPT_KEYS
from explorer.registry import VIEWS, names_in

SCRUBBER = """<div class='um-scrub' data-kept='""" + ",".join(KEPT_KEYS) + """'>
<button class='um-prev' id='prev' title='previous step'>◀</button>
<button class='um-play' id='play' title='play / pause'>▶ / ❚❚</button>
<button class='um-next' id='next' title='next step'>▶</button>
<input class='um-range' id='step' type='range' min='1' max='1' value='1' aria-label='step'>
<span class='um-step-label' id='step-label'>step – / –</span>
<label class='um-speed-l'>speed <select class='um-speed' id='speed' title='play speed'><option value='1'>1 step/s</option><option value='2'>2 steps/s</option><option value='3' selected>3 steps/s</option><option value='5'>5 steps/s</option><option value='10'>10 steps/s</option></select></label>
<label class='um-pos'>position <input class='um-pos-box' id='position' type='number' min='0'></label>
<span class='um-keys' id='keys-help'>keys: ← / → step · space plays</span>
</div>
<div class='um-tune' id='tune-note' aria-live='polite'></div>
<div class='um-link-row'><label>Link to this run at this step
<input class='um-link' id='link' readonly></label><button class='um-copy' id='copy-link'>Copy</button></div>"""

# what an ask may name: the "server" views (the browser asks for the visible ones at each settled step), and a
# view of the open tab (the browser asks again for one gradio left empty: assets/js/scrub.js ``refill``), so an
# ask draws at most one tab's views beside the server's
SERVER_VIEWS = {v.name for v in VIEWS if v.scrub == "server"}
ASKABLE = {v.elem_id: v.name for v in VIEWS}


def build_playback() -> gr.HTML:
    return gr.HTML(SCRUBBER, elem_id="scrubber", js_on_load=js("legend_under.js") + "\n" + js("scrub.js"))


def stale(box: dict, seq) -> bool:
    """Whether an ask is older than one already drawn (asks may arrive out of order); remembers the newest."""
    if not isinstance(seq, int) or isinstance(seq, bool):
        return False
    if seq <= box.get("seq", -1):
        return True
    box["seq"] = seq
    return False


def settled(views, tr, box, evt: gr.EventData):
    """The step settled in the browser: remember it (a tab opened later draws there) and draw the visible views
    it names (those it cannot move itself, or found empty). The event's data comes from the browser, so every
    field is checked."""
    data = getattr(evt, "_data", None)
    data = data if isinstance(data, dict) else {}
    step, pos, ids = data.get("step"), data.get("pos"), data.get("views")
    nothing = {p: gr.skip() for p in views.plots.values()}
    if tr is None or not isinstance(step, int) or isinstance(step, bool) or not isinstance(ids, list):
        return nothing
    pos = pos if isinstance(pos, int) and not isinstance(pos, bool) else None
    if isinstance(box, dict):
        if stale(box, data.get("seq")):
            return nothing
        box["step"], box["pos"] = step, pos         # where "Branch here" branches from
    tab = names_in(box.get("tab") if isinstance(box, dict) else None)
    names = {ASKABLE[i] for i in ids if isinstance(i, str) and i in ASKABLE} & (SERVER_VIEWS | tab)
    n = len(tr.records)
    if not names or n == 0:
        return nothing
    out = render_views(tr, min(max(step, 1), n) - 1, pos, names)
    return {views.plots[k]: v for k, v in out.items()}


def wire_playback(scrubber: gr.HTML, views, trace_state) -> None:
    def on_settle(tr, box, evt: gr.EventData):   # gradio passes the event's data by this annotation
        return settled(views, tr, box, evt)

    # multiple: every settled step is drawn, in order of its number (``stale``). gradio's default, "once", drops
    # an ask made while the last is drawing; "always_last" replays the first deferred ask's data, not the last's
    scrubber.submit(on_settle, [trace_state, views.tab], list(views.plots.values()), show_progress="hidden",
                    trigger_mode="multiple")
