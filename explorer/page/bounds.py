"""Every value a client sends bounded before gradio keeps it (``layout.guard_inputs`` asks ``unbounded`` first).

gradio's preprocessing stores each input's value in the session (``SessionState._update_value_in_config``) and walks
it for file data on the server's event loop *before* the component's own check refuses it, and a request waiting
at the fair gate holds its values. The page's inputs all take one value (a check box, a radio, a slider, a number,
a choice, a text; a ``State`` is the server's own and its sent value is not read), so a list or an object is
refused outright, whatever its depth, in constant time, and so are more values than the handler has inputs; a
text is held to its box's ``max_length`` (else ``state.MAX_QUERY_VALUE``), and any other string to ``MAX_CHOICE``
characters (the page's longest choice has 25). So a session keeps at most a few bytes per control beside its texts.
"""

from __future__ import annotations

import gradio as gr
from gradio.components.api_component import Api

from explorer.state import MAX_QUERY_VALUE

MAX_CHOICE = 200                        # characters of a value that is not a text (a choice, a custom decoder name)
SINGLE = (str, int, float, bool, type(None))


def unbounded(components, values) -> str | None:
    """The one-line message for more values than the handler has inputs (gradio zips them with its components
    and would keep the rest in the request while it waits), or for the first value a control does not take by its
    kind or size; None when all are taken."""
    components = components or ()
    if isinstance(values, list) and len(values) > len(components):
        return f"too many values: {len(values)} sent, this takes {len(components)}"
    for comp, value in zip(components, values if isinstance(values, list) else ()):
        if getattr(comp, "stateful", False):
            continue
        if not isinstance(value, SINGLE):
            return f"a {type(value).__name__} where this field takes a single value"
        if not isinstance(value, str):
            continue
        text = isinstance(comp, (gr.Textbox, Api))
        limit = (getattr(comp, "max_length", None) or MAX_QUERY_VALUE) if text else MAX_CHOICE
        if len(value) > limit:
            what = "a text" if text else "a value"
            return f"{what} of {len(value)} characters; this field takes at most {limit}"
    return None
