"""Every handler the page registers, called with the inputs a hostile client can send instead of the browser's
(None, lists, NaN, huge numbers, markup, dicts): each returns or raises the one-line user error (``gr.Error``),
never anything else. Run in-process against the real page (create_app), bounded (one short decode at most)."""

import asyncio
import inspect
from pathlib import Path

import gradio as gr
from gradio.helpers import special_args
import pytest

NASTY = [None, float("nan"), 10**30, -1, [1, 2], {"a": 1}, "<a href=//x.tld>x</a>", "٠.٩", "", True]


def drive(result):
    """Run a handler's result to its end: a value, a coroutine, or a (sync or async) generator."""
    if inspect.isasyncgen(result):
        async def consume():
            return [x async for x in result]
        return asyncio.run(consume())
    if inspect.iscoroutine(result):
        return asyncio.run(result)
    if inspect.isgenerator(result):
        return list(result)
    return result


@pytest.fixture(scope="module")
def demo(tmp_path_factory, monkeypatch_module):
    monkeypatch_module.setenv("UNMASK_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    monkeypatch_module.setenv("UNMASK_MAX_SECONDS", "5")
    import app
    return app.create_app()


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def takes_event(fn) -> bool:
    return any(isinstance(p.annotation, type) and issubclass(p.annotation, gr.EventData) or p.annotation in
               ("gr.EventData", "EventData") for p in inspect.signature(fn).parameters.values())


def test_every_registered_handler_answers_nasty_input_with_a_user_error(demo):
    called, failures = 0, []
    for fn in demo.fns.values():
        if fn.fn is None or not fn.inputs:
            continue
        for value in NASTY:
            # a gr.State lives on the server: a client cannot send one, so it keeps its initial value
            args = [c.value if isinstance(c, gr.State) else value for c in fn.inputs]
            if takes_event(fn.fn):   # event data comes from the browser too: fuzz it, as a bare value and as fields
                args.append(gr.EventData(None, value if value is not None else {"step": 3, "pos": value,
                                                                                     "views": [value, "traj-plot"]}))
            args, *_ = special_args(fn.fn, args)    # as gradio calls it: a gr.Request parameter gets the request
            try:
                drive(fn.fn(*args))
            except gr.Error as e:
                if "\n" in str(e) or ("<a" in str(e) and fn.name != "decode"):   # pop-ups escaped; the API is text
                    failures.append(f"{fn.name}({value!r}): unescaped or multi-line: {str(e)[:80]}")
            except Exception as e:   # anything else is a traceback in the server's log
                failures.append(f"{fn.name}({value!r}): {type(e).__name__}: {str(e)[:80]}")
            called += 1
    assert called > 100
    assert not failures, "\n".join(failures)


def test_browser_driven_events_never_drop_the_latest_request(demo):
    """A step or position settled while the previous one is still drawing must be drawn after it: gradio's default
    trigger mode ("once") drops it and "always_last" replays the first deferred ask's data, so every ask is sent
    ("multiple") and numbered, and the server skips an ask older than one it has drawn."""
    from explorer.page.playback import stale
    settles = [fn for fn in demo.fns.values() if getattr(fn.fn, "__name__", None) == "on_settle"]
    assert settles and all(fn.trigger_mode == "multiple" for fn in settles)
    box = {}
    assert [stale(box, n) for n in (1, 3, 2, 3, 4)] == [False, False, True, True, False]
    assert not stale(box, None) and not stale(box, True) and box["seq"] == 4   # unnumbered asks are drawn


def test_an_ask_draws_the_server_views_and_the_open_tabs_but_no_other_tabs_view():
    """The browser asks again for a view of the open tab that gradio left empty (assets/js/scrub.js ``refill``):
    drawn at the asked step; a view the browser moves itself in another tab is not drawn for any ask, so one ask
    draws at most one tab's views beside the "server" ones."""
    from types import SimpleNamespace
    from engine.records.trace import Trace
    from explorer.page.playback import settled
    from explorer.registry import VIEWS
    tr = Trace.load(Path(__file__).resolve().parent.parent / "assets" / "examples" / "tspd.npz")
    views = SimpleNamespace(plots={v.name: v.elem_id for v in VIEWS})       # a plot by its view's name

    def ask(tab, ids, seq):
        evt = SimpleNamespace(_data={"step": 2, "pos": None, "views": ids, "seq": seq})
        return sorted(k for k, v in settled(views, tr, {"tab": tab}, evt).items() if not isinstance(v, type(gr.skip())))
    assert ask("TSPD + CE", ["ce-plot", "traj-plot"], 1) == ["ce-plot", "traj-plot"]
    assert ask("Decode", ["ce-plot", "traj-plot", "mask-plot"], 2) == ["mask-plot", "traj-plot"]
    assert ask("Decode", ["verifier-plot", "kv-plot", "nope", 3], 3) == []


def test_a_value_a_control_cannot_take_is_a_short_message_without_a_traceback(demo):
    """gradio's own preprocessing (a slider sent None or text, a choice not offered, too few inputs), in a session
    whose components a handler has updated (gradio then preprocesses the session's own copy): the page's one-line
    message, not printed as a traceback, the value not echoed whole; a browser-only event is refused."""
    from gradio.state_holder import SessionState
    state = SessionState(demo)
    for block in demo.blocks.values():          # as after an update: every component a fresh instance
        if isinstance(block, (gr.Dropdown, gr.Radio)):
            state[block._id] = type(block)(choices=["a", "b"], value="a")
    refused = 0
    for fn in demo.fns.values():
        for data in [[value] * len(fn.inputs) for value in NASTY + ["x" * 100_000]] + [[None] * (len(fn.inputs) - 1)]:
            try:
                asyncio.run(demo.preprocess_data(fn, data, state))
            except gr.Error as e:
                assert not e.print_exception and "\n" not in str(e) and len(str(e)) <= 300, (fn.name, str(e)[:80])
                refused += 1
            else:
                assert fn.fn is not None, f"the browser-only {fn.name} was preprocessed"
    assert refused > 300                                  # sliders and dropdowns refused most of them


def test_runs_label_is_set_in_the_browser_around_each_run(demo):
    """Run's "Running…" and "Run" around each run (Run, a dial's release, a picked problem) are browser functions.
    As server functions each was a round trip through the queue, and at each step of one gradio's page refreshes
    the loading status of every component an event has used: one Run cost 1.12 CPU-s of Chromium, 0.66 now (median
    of eight, the same page side by side). Stop's is the one server function that writes Run's label alone: it
    cancels the run."""
    run, stop = (next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == i) for i in ("run", "stop"))
    label = [fn for fn in demo.fns.values() if [o._id for o in fn.outputs] == [run._id]]
    server = [fn for fn in label if fn.fn is not None]
    assert [fn.targets[0][0] for fn in server] == [stop._id], [fn.name for fn in server]
    said = [fn.js.strip()[-14:] for fn in label if fn.fn is None]
    starts, ends = sum("'Running…'" in s for s in said), sum(s.endswith("'Run'") for s in said)
    assert starts == ends and starts >= 3, said                      # each run's start has its end
    followed = {fn.trigger_after for fn in demo.fns.values() if fn.fn is not None and fn.trigger_after is not None}
    assert {fn._id for fn in label if fn.fn is None and "'Running…'" in fn.js} <= followed   # and a run after it


def test_no_event_shows_progress_on_more_than_one_control(demo):
    """gradio's page keeps each progress target any event has had, walking the layout for each at every step of
    every later event: a switch of decoder (each tour stop's, a link's) showed progress on the ninety controls it
    rewrites, so after it every status message walked ten times the nodes (the tour's main thread: 6.7 of 24 s in
    those walks, 1.0 s after). Each event now marks the one block a visitor watches (the decoder's card)."""
    cfg = demo.get_config_file()
    run = next(d for d in cfg["dependencies"] if d.get("api_name") == "on_run")
    controls = set(run["inputs"][2:])
    wide = {d["id"]: len(set(d.get("show_progress_on") or d["outputs"]) & controls) for d in cfg["dependencies"]}
    assert max(wide.values()) <= 1, {i: n for i, n in wide.items() if n > 1}
    switch = [d for d in cfg["dependencies"] if len(set(d["outputs"]) & controls) > 80]
    assert len(switch) >= 2                                # not vacuous: events that write every control remain


def test_a_plain_load_a_run_and_a_release_keep_the_controls_out_of_the_pages_loading_status(demo):
    """At every step of every event (its start, its queue, each streamed frame, its end) gradio's page refreshes
    the loading status of each component that an event run so far has shown progress on (its outputs, or its
    ``show_progress_on``), finding each by a walk of the whole layout. The load wrote the ninety controls (most of
    them hidden) with the example: nine tenths of those walks for the rest of the visit, 1.2-1.4 s of the browser's
    main thread on opening the page. The load writes none of them now (they are built at the example's setting); a
    link sets them in its own events, which a plain load does not start; and the sliders' releases are one chain,
    not fifty-nine."""
    cfg = demo.get_config_file()
    order = {}

    def walk(node):
        order.setdefault(node["id"], len(order))
        for child in node.get("children") or []:
            walk(child)
    walk(cfg["layout"])
    deps = {d["id"]: d for d in cfg["dependencies"]}
    shows = lambda d: set(d.get("show_progress_on") or d["outputs"])                 # noqa: E731
    load = next(d for d in deps.values() if ["load"] == [t[1] for t in d["targets"]])
    run = next(d for d in deps.values() if d.get("api_name") == "on_run")
    controls = set(run["inputs"][2:])            # the prompt, model, decoder and every parameter
    assert len(controls) > 90 and not (set(load["outputs"]) | shows(run)) & controls
    walked = sum(order[i] for i in shows(load) | shows(run))
    assert walked < sum(order[i] for i in controls) / 5, walked     # 2 508 nodes a step; 25 627 with the controls
    later = {d["trigger_after"] for d in deps.values() if d.get("trigger_after") is not None}
    assert load["id"] not in later               # nothing follows the load itself; a link's change does
    chain = [d for d in deps.values() if d.get("api_name") == "maybe_run"]
    starts = deps[chain[0]["trigger_after"]]
    assert len(chain) == 1 and [t[1] for t in starts["targets"]] == ["change"]
    assert set(starts["targets"][0][:1]) <= set(load["outputs"])     # the state the load sets for a link
    releases = [d for d in deps.values() if any(t[1] == "release" for t in d["targets"])]
    sliders = {c["id"] for c in cfg["components"] if c["type"] == "slider"} & controls
    assert len(releases) == 1 and {t[0] for t in releases[0]["targets"]} == sliders and len(sliders) > 50
