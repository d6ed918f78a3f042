"""Outputs a handler leaves alone cost nothing on the server's event loop.

A handler that returns ``{component: value}`` for some of its event's outputs leaves the others as they are; gradio
6.31 (``Blocks.postprocess_data``) treats each of those as an empty update and, on the event loop, builds a new copy of
the component from its constructor arguments, puts it in the session and rebuilds its config (signatures read, the
API schema walked) only to send ``{"__type__": "update"}``: about 1 ms per output. A page Run's event has 124
outputs (every view of every tab, the export, the forty controls) and a message sets one to eight of them: about 1 s
of the event loop's CPU per Run, uncharged to anyone; 40 Runs at once kept it there for most of their 171 s, every
other request waiting (issue 74, point 4). ``skip_untouched`` hands gradio only the outputs a message sets and
answers the others itself with what gradio would have sent: an empty update (``None`` for a ``gr.State``), which the
browser ignores.
"""

from __future__ import annotations

import copy

import gradio as gr
from gradio.blocks import Block

EMPTY = {"__type__": "update"}     # gr.skip(), gr.update() with nothing in it


def untouched(value) -> bool:
    return isinstance(value, dict) and value == EMPTY


def split(block_fn, predictions) -> tuple[list, dict] | None:
    """(the outputs a message sets, their values by id), or None where gradio's own path must run: a list or a
    single value, a batch or validator event, one output, or a component that is not among the event's outputs
    (gradio matches those by key, or refuses them)."""
    if (not isinstance(predictions, dict) or getattr(block_fn, "batch", False) or len(block_fn.outputs) < 2
            or getattr(block_fn, "is_validator_function", False)):
        return None
    if untouched(predictions):                        # one gr.skip() for every output
        return [], {}
    if not predictions or not all(isinstance(k, Block) for k in predictions):
        return None
    ids = {b._id for b in block_fn.outputs}
    if any(k._id not in ids for k in predictions):
        return None
    values = {k._id: v for k, v in predictions.items() if not untouched(v)}
    return [b for b in block_fn.outputs if b._id in values], values


def skip_untouched(demo: gr.Blocks) -> None:
    """See the module's docstring: wraps ``demo.postprocess_data``."""
    postprocess = demo.postprocess_data

    async def quick(block_fn, predictions, state):
        parts = split(block_fn, predictions)
        if parts is None or len(parts[0]) == len(block_fn.outputs):
            return await postprocess(block_fn, predictions, state)
        kept, values = parts
        done = {}
        if kept:
            sub = copy.copy(block_fn)           # the same event, its outputs narrowed to the ones set
            sub.outputs = kept
            set_ = [values[b._id] for b in kept]     # in order; gradio takes one output's value bare
            done = dict(zip((b._id for b in kept), await postprocess(sub, set_ if len(kept) > 1 else set_[0], state)))
        return [done[b._id] if b._id in done else (None if b.stateful else dict(EMPTY)) for b in block_fn.outputs]

    demo.postprocess_data = quick
