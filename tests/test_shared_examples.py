"""Nothing a visitor does changes what another is shown (issue 74): the page's handlers, called as gradio calls
them on the real page (``app.create_app``, in process), one session acting and another opening the page after.
The pre-baked examples every session is served are frozen (``explorer.page.examples``, ``engine.records.frozen``)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from types import SimpleNamespace

import gradio as gr
import numpy as np
import plotly.graph_objects as go
import pytest

from engine.records.trace import Trace

MODEL = "unmask-tasks-small"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """(demo, page) of the real page, its models loaded, its trace cache in a temporary folder."""
    mp = pytest.MonkeyPatch()
    mp.setenv("UNMASK_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    mp.setenv("UNMASK_MAX_SECONDS", "60")
    import app
    seen = {}
    build = app.build_demo

    def keep(page):
        seen["page"] = page
        return build(page)
    mp.setattr(app, "build_demo", keep)
    demo = app.create_app()
    yield demo, seen["page"]
    mp.undo()


def handler(demo, name: str):
    return next(f for f in demo.fns.values() if getattr(f.fn, "__name__", None) == name)


def drive(result):
    async def go_():
        return [x async for x in result]
    return asyncio.run(go_()) if hasattr(result, "__aiter__") else result


def dump(value) -> str:
    """A stable text of one output: a figure's JSON, a trace's arrays and metadata, a component update's
    arguments, anything else as JSON (``repr`` for what JSON cannot say)."""
    if isinstance(value, go.Figure):
        return value.to_json()
    if isinstance(value, Trace):
        h = hashlib.sha256()
        for k, a in sorted(value.to_arrays().items()):
            h.update(k.encode() + np.ascontiguousarray(a).tobytes())
        return "trace " + h.hexdigest()
    if isinstance(value, gr.blocks.Block):
        return type(value).__name__ + json.dumps(value.constructor_args, sort_keys=True, default=dump)
    return json.dumps(value, sort_keys=True, default=dump)


def serialised(outs) -> str:
    """Every output of a handler's answers (a dict of component -> value, or a tuple), as stable text."""
    lines = []
    for out in outs if isinstance(outs, list) else [outs]:
        items = sorted(out.items(), key=lambda kv: kv[0]._id) if isinstance(out, dict) else enumerate(out)
        lines += [f"{getattr(k, '_id', k)}: {dump(v)}" for k, v in items]
    return "\n".join(lines)


def opening(demo, session: str) -> tuple[str, dict]:
    """A new visitor's opening page (the load handler, no link): its outputs as text, and as they are."""
    out = handler(demo, "load").fn({"tab": None}, None)
    return serialised(out), out


def test_a_branch_of_the_opening_run_leaves_every_other_visitor_s_opening_page_as_it_was(site):
    """Issue 74: on the opening page, the step slider at 10, Branch here, SPEC ``s2d2``, run the branch: every
    new visitor's opening threshold run then carried an S2D2 tab of grey cells, and the "views this run leaves
    out" line lost its S2D2 link (the branch's trace re-owned the shared example's records)."""
    from explorer.page.branch import open_branch
    from explorer.registry import tabs_shown
    demo, page = site
    before, out = opening(demo, "first")
    assert opening(demo, "second")[0] == before                          # the text is stable
    shown = next(v for v in out.values() if isinstance(v, Trace))
    assert shown is page.example_traces["threshold"] and tabs_shown(shown) == ["Decode"]
    point, *_ = open_branch(shown, {"tab": None}, 10, -1, "branch")
    on_branch = handler(demo, "on_branch").fn
    answers = drive(on_branch(SimpleNamespace(session_hash="first"), shown, point, None, "", "s2d2"))
    assert answers and "Branched after step 10" in answers[-1][0]
    assert tabs_shown(page.example_traces["threshold"]) == ["Decode"]
    assert opening(demo, "third")[0] == before


def test_a_served_example_refuses_every_change(site):
    """The examples are frozen all the way down: a change raises where it is made instead of reaching the next
    visitor."""
    from dataclasses import FrozenInstanceError
    _, page = site
    with pytest.raises(TypeError):
        page.example_traces["threshold"] = None
    for tr in page.example_traces.values():
        r, m = tr.records[0], tr.meta
        for change in (lambda: setattr(tr, "records", []), lambda: setattr(r, "decoder", "s2d2"),
                       lambda: setattr(m, "cached", False), lambda: setattr(m, "decoder", "x")):
            with pytest.raises(FrozenInstanceError):
                change()
        for change in (lambda: r.committed.__setitem__(0, True), lambda: r.extra.__setitem__("x", 1),
                       lambda: m.params.update(tau=0.1), lambda: m.prompt_ids.append(1),
                       lambda: tr.records.append(r)):
            with pytest.raises((TypeError, ValueError, AttributeError)):
                change()
        # a copy is the visitor's own to change, and a trace built from its records owns copies of them
        params = dict(m.params)
        params["tau"] = 0.1
        joined = Trace(meta={**m.to_dict(), "decoder": "s2d2"}, records=list(tr.records[:2]))
        assert joined.records[0].decoder == "s2d2" and r.decoder == m.decoder
