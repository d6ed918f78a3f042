"""Idle sessions are let go: gradio's own StateHolder, its sessions used at chosen times."""

import datetime

import gradio as gr
from gradio.state_holder import StateHolder

from explorer.page.sessions import let_go_idle


def holder_with(sessions: dict[str, float]) -> tuple[StateHolder, datetime.datetime]:
    """A StateHolder of a small page whose sessions were last used that many seconds before `now`."""
    with gr.Blocks() as demo:
        gr.State(None)
        gr.Textbox()
    h = StateHolder()
    h.set_blocks(demo)
    now = datetime.datetime(2026, 12, 2, 12, 0, 0)
    for s, ago in sessions.items():
        h[s]
        h.time_last_used[s] = now - datetime.timedelta(seconds=ago)
    return h, now


def test_only_the_sessions_unused_for_longer_than_the_idle_time_go():
    h, now = holder_with({"old": 700, "edge": 600, "fresh": 5})
    assert let_go_idle(h, 600, now) == 1
    assert set(h.session_data) == {"edge", "fresh"} and set(h.time_last_used) == {"edge", "fresh"}
    assert let_go_idle(h, 600, now + datetime.timedelta(seconds=1)) == 1
    assert set(h.session_data) == {"fresh"}


def test_a_session_back_after_being_let_go_starts_afresh():
    h, now = holder_with({"a": 900})
    h.session_data["a"].state_data[0] = "a run"
    let_go_idle(h, 600, now)
    assert "a" not in h and h["a"].state_data == {}


def test_last_use_times_of_sessions_the_cap_evicted_are_dropped():
    h, now = holder_with({"a": 1, "b": 1})
    h.session_data.pop("a")                 # as the capacity cap does, leaving its time behind
    let_go_idle(h, 600, now)
    assert set(h.time_last_used) == {"b"}


def test_stray_copies_of_updated_controls_are_dropped_and_the_page_s_own_kept():
    """As gradio 6 leaves them: an updated control's new instance filed under its own id as well."""
    from explorer.page.sessions import prune_strays
    h, _ = holder_with({"a": 1})
    state = h.session_data["a"]
    page_ids = set(state.blocks_config.blocks)
    box = next(b for b in state.blocks_config.blocks.values() if isinstance(b, gr.Textbox))
    copy = gr.Textbox(render=False)                      # the copy gradio makes for an update
    state.blocks_config.blocks[box._id] = copy
    state.blocks_config.blocks[copy._id] = copy          # ... and files again under the copy's id
    state.config_values[copy._id] = {"props": {}}
    assert prune_strays(h, page_ids) == 1
    assert set(state.blocks_config.blocks) == page_ids and copy._id not in state.config_values
    assert state.blocks_config.blocks[box._id] is copy   # the update itself stays


def lazy_and_eager():
    """A small page with an input, an output and a state; a lazy and an eager session of it."""
    from gradio.state_holder import SessionState
    from explorer.page.session_state import LazySessionState
    with gr.Blocks() as demo:
        gr.State([1])
        box, out = gr.Textbox("hi", label="in"), gr.Textbox(label="out")
        gr.Slider(0, 9, 3)
        box.submit(lambda s: s.upper(), box, out)
    return demo, box, LazySessionState(demo), SessionState(demo)


def test_a_lazy_session_builds_nothing_until_an_event_touches_a_component():
    import asyncio
    demo, box, lazy, eager = lazy_and_eager()
    assert lazy.config_values == {} and len(eager.config_values) >= 4
    fn = next(iter(demo.fns.values()))
    asyncio.run(demo.preprocess_data(fn, ["typed"], lazy))       # gradio's own preprocessing of one event
    asyncio.run(demo.preprocess_data(fn, ["typed"], eager))
    assert set(lazy.config_values) == {box._id}                    # the input the event carried, nothing else
    assert lazy.config_values[box._id] == eager.config_values[box._id]
    assert lazy.config_values[box._id]["props"]["value"] == "typed"


def test_a_lazy_session_s_components_are_gradio_s_own():
    """What a deep link reads: every component's configuration, as gradio builds it at the session's start."""
    _, _, lazy, eager = lazy_and_eager()
    assert sorted(map(str, lazy.components)) == sorted(map(str, eager.components))
    assert lazy.state_data == eager.state_data and lazy.blocks_config.blocks == eager.blocks_config.blocks


def test_installed_sessions_are_lazy_for_the_app_and_its_blocks():
    from explorer.page.session_state import LazySessionState, install
    demo, *_ = lazy_and_eager()
    app = gr.routes.App.create_app(demo)
    install(app)
    assert app.state_holder is demo.state_holder
    assert isinstance(app.state_holder["s"], LazySessionState)
