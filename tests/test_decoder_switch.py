"""A decoder picked from the menu starts at its own defaults for its own dials (S2D2, SimSD and TSPD + CE started
at the opening story's τ 1), carries the task's settings over, and says which dials moved in one line."""

from __future__ import annotations

import warnings

import gradio as gr

from engine.catalogue import catalogue
from explorer.page.controls import decoder_defaults


def test_a_picked_decoder_loads_its_own_dials_defaults_and_keeps_length_and_sampling():
    keys = ["tau", "block_size", "gen_length", "temperature", "seed", "use_cache"]
    now = [1.0, 4, 128, 0.7, 5, True]
    with warnings.catch_warnings(record=True):
        out = dict(zip(keys, decoder_defaults(keys, "tspd", *now)))
    tspd = catalogue.params_of("tspd")
    assert out["tau"] == tspd["tau"].default != 1.0 and out["block_size"] == tspd["block_size"].default
    assert all(out[k] == gr.skip() for k in ("gen_length", "temperature", "seed", "use_cache"))


def test_dials_already_at_the_default_or_not_read_are_left_alone():
    keys = ["tau", "steps"]
    out = decoder_defaults(keys, "wino", 1.0, 0)          # WINO reads no τ of this name
    assert all(v == gr.skip() for v in out)
    assert all(v == gr.skip() for v in decoder_defaults(["tau"], "s2d2", catalogue.params_of("s2d2")["tau"].default))
    assert all(v == gr.skip() for v in decoder_defaults(["tau"], "<not a decoder>", 1.0))
