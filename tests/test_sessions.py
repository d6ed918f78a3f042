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
