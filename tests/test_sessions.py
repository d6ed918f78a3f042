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
