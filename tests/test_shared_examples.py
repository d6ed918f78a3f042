"""Nothing a visitor does changes what another is shown (issue 74): the page's handlers, called as gradio calls
them on the real page (``app.create_app``, in process), one session acting and another opening the page after.
The pre-baked examples every session is served are frozen (``explorer.page.examples``, ``engine.records.frozen``)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
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
    from explorer import layout
    seen, build, tour = {}, app.build_demo, layout.wire_tour

    def keep(page):
        seen["page"] = page
        return build(page)

    def keep_tour(page, rp, card, bp, more):       # the run's parts and the tour's card, for the handlers below
        seen.update(rp=rp, card=card)
        return tour(page, rp, card, bp, more)
    mp.setattr(app, "build_demo", keep)
    mp.setattr(layout, "wire_tour", keep_tour)
    demo = app.create_app()
    demo.parts = seen
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
    arguments, an exported file's bytes (its name is the session's own), anything else as JSON."""
    if isinstance(value, str) and value.startswith("/") and len(value) < 1024 and Path(value).is_file():
        return "file " + hashlib.sha256(Path(value).read_bytes()).hexdigest()
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
    model = page.default_model                        # the held-out problems and the model cards, shared too
    for change in (lambda: page.examples[model].append(("x", None)), lambda: page.examples.pop(model),
                   lambda: page.model_infos[model]["decoders"].update(s2d2="not here"),
                   lambda: page.model_infos[model].__setitem__("task", "chat")):
        with pytest.raises(TypeError):
            change()
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


def served(demo, page) -> str:
    """What any visitor is served without a model call: the opening page, each example shown as the run (as the
    tour and Compare show them), each tour stop."""
    from explorer.page.run import show_trace
    rp, card = demo.parts["rp"], demo.parts["card"]
    texts = [opening(demo, "B")[0]]
    texts += [serialised(show_trace(page, rp, ex, None, None, example=True, box={"tab": None}))
              for ex in page.example_traces.values()]
    stops = next(f for f in demo.fns.values() if f.inputs[:1] == [card[-1]] and len(f.inputs) == 3)
    i = -1
    for _ in range(len(__import__("explorer.page.tour", fromlist=["STOPS"]).STOPS)):
        out = stops.fn(i, {"tab": None}, None)
        i = out[card[-1]]
        texts.append(serialised(out))
    return "\n\n".join(texts)


def call(demo, fn, request, values: dict):
    """A handler called as gradio calls it: its inputs' values by component (a State its initial value, any
    other its default), the request first when it takes one."""
    import copy
    import inspect
    args = [values[c] if c in values else copy.deepcopy(c.value) for c in fn.inputs]
    params = list(inspect.signature(fn.fn).parameters.values())
    if params and params[0].name == "request":
        args = [request] + args
    elif any(p.name == "request" for p in params):
        return drive(fn.fn(*args, request=request))
    return drive(fn.fn(*args))


def act(demo, page, check) -> list[str]:
    """One visitor (session A) runs every action the page has, ``check(what)`` after each (another action may
    undo a change: a branch with the example's own decoder re-owned its records back); what each did."""
    from engine.runtime.branch import canvas_after
    from explorer.page import compare, sweep
    from explorer.page.branch import open_branch
    from explorer.page.more_views import href, tab_decoders
    from explorer.page.share import make_gif
    from urllib.parse import parse_qsl
    done = []
    a = SimpleNamespace(session_hash="A", client=None, query_params={})
    run = handler(demo, "on_run")
    outs = call(demo, run, a, {})
    tr = next(v for v in outs[-1].values() if isinstance(v, Trace) and v.meta.finished)
    done.append(f"Run: {tr.meta.decoder}, {len(tr.records)} forwards")
    check(done[-1])
    load, set_link, linked = handler(demo, "load"), handler(demo, "set_link"), handler(demo, "maybe_run")
    for tab, names in tab_decoders().items():       # each link of "views this run leaves out"
        for name in names:
            query = href(page, tab, name)
            if query is None:
                continue
            req = SimpleNamespace(session_hash="A", client=None, query_params=dict(parse_qsl(query[1:])))
            shown = load.fn({"tab": None}, req)
            lk = next(v for c, v in shown.items() if c in set_link.inputs)
            assert lk and lk["run"], query                 # a link of a decoder's tab runs it
            shown.update(set_link.fn(lk))
            got = call(demo, linked, req, {c: v for c, v in shown.items() if not isinstance(v, type(gr.skip()))})
            done.append(f"link {tab}/{name}: {len(got)} answers")
            check(done[-1])
    on_branch = handler(demo, "on_branch")
    example = next(v for v in opening(demo, "A")[1].values() if isinstance(v, Trace))
    for base, step in ((example, 10), (tr, 2)):     # from the opening run as served, and from the visitor's Run
        point, *_ = open_branch(base, {"tab": None}, step, None, "branch")
        for spec in ("s2d2", "edit"):                # Branch here with another decoder
            done.append(f"branch {spec}: {len(drive(on_branch.fn(a, base, point, None, '', spec)))} answers")
            check(done[-1])
        after = canvas_after(base, step)
        m = base.meta
        masked = next(p for p in range(m.prompt_len, m.gen_end) if after[p] == m.mask_token_id)
        point, _, radio, _ = open_branch(base, {"tab": None}, step, masked, "branch")
        forced = radio.constructor_args["choices"][-1][1]
        done.append(f"branch forced: {len(drive(on_branch.fn(a, base, point, forced, '', '')))} answers")
        check(done[-1])
    cmp = next(f for f in demo.fns.values() if getattr(f.fn, "func", None) is compare.run_compare)
    done.append(f"compare: {len(drive(cmp.fn(tr.meta.prompt, tr.meta.model, 'threshold', 'ar', request=a)))}")
    check(done[-1])
    sw = next(f for f in demo.fns.values() if getattr(f.fn, "func", None) is sweep.run_sweep)
    swept = drive(sw.fn(tr.meta.model, "threshold", "0.9", "8", "", "picks", 2, 0.0, request=a,
                        progress=lambda *x, **k: None))
    done.append(f"sweep: {len(swept)} answers")
    check(done[-1])
    done.append(f"gif: {make_gif(page, tr, a) is not None}")
    check(done[-1])
    served(demo, page)                               # the tour's stops and the examples, in this session too
    return done


def test_nothing_one_visitor_does_changes_what_another_is_served(site):
    """Issue 74: one session runs every action of the page (Run, each "views this run leaves out" link, Branch
    with two other decoders and with a forced token, Compare, a small Sweep, a GIF and the exports, the tour's
    stops); another session's opening page, each example as the page shows it and each tour stop are the same
    bytes before and after (figures' JSON, HTML, component updates, exported files' content)."""
    demo, page = site
    before, first = served(demo, page), opening(demo, "B")[0]
    assert served(demo, page) == before                # the text is stable

    def check(what: str) -> None:
        assert opening(demo, "B")[0] == first, f"after {what}, a new visitor's opening page changed"
    done = act(demo, page, check)
    print("\n".join(done))
    after = served(demo, page)
    diff = [(x, y) for x, y in zip(before.splitlines(), after.splitlines()) if x != y]
    assert after == before, (done, diff[:3])


@dataclass
class Card:
    """A plain dataclass, as a model card's value might be."""
    decoders: list = field(default_factory=list)


def test_a_frozen_value_is_read_only_in_its_tuples_and_dataclasses():
    """The app's held-out examples are (prompt, Problem) tuples: the Problem's answer (a list of constraints, a
    dict) is shared by every session, so it is frozen too; a plain dataclass refuses assignment; an array's
    read-only flag cannot be set back."""
    import copy
    import pickle
    from dataclasses import FrozenInstanceError
    from engine.records.frozen import frozen_value
    from engine.tasks.common import Problem
    problem = Problem("Q : 1 + 1 A :", "2", ["a constraint"])
    shared = frozen_value({"m": [("Q", problem)], "card": Card(["threshold"]), "ids": np.arange(4)})
    (_, got), card, ids = shared["m"][0], shared["card"], shared["ids"]
    assert got == problem and isinstance(card, Card)
    for change in (lambda: got.answer.append("x"), lambda: card.decoders.append("s2d2"),
                   lambda: ids.__setitem__(0, 9), lambda: setattr(ids.flags, "writeable", True)):
        with pytest.raises((TypeError, ValueError)):
            change()
    with pytest.raises(FrozenInstanceError):
        card.decoders = []
    assert problem.answer == ["a constraint"]                # the original is not changed
    for plain in (copy.copy(card), pickle.loads(pickle.dumps(card))):
        assert type(plain) is Card and plain.decoders == ["threshold"]
        plain.decoders = []
