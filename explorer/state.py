"""Controls <-> URL query parameters, so a link reproduces a run: ``?decoder=s2d2&tau=0.85&block_size=4&prompt=...``.

The keys are the catalogue's parameter names (``engine.catalogue.catalogue``). Values are parsed by each parameter's type
and clamped to its page range; unknown keys, unparsable or non-finite values are ignored and reported, and a clamped
value is reported with the value used (as plain text: the page escapes it), never fatal.
"""

from __future__ import annotations

from urllib.parse import urlencode

from engine.catalogue import catalogue
from engine.catalogue.spec import parse_spec
from engine.runtime.branch import branch_json, parse_branch
from engine.errors import ConfigError
from explorer.registry import TABS

# pos: the selected position (the browser applies it); branch: engine.runtime.branch's JSON
PAGE_KEYS = ("prompt", "decoder", "model", "step", "pos", "branch", "tab", "trace")
ALIASES = {"block": "block_size"}          # links made before the catalogue named it block_size
GRADIO_KEYS = ("__theme", "view")          # gradio's own: the theme, and its API page and settings (?view=api)
KEPT_KEYS = ("__theme",)                   # of the page, not of a run: every address the page makes keeps them
MAX_QUERY_VALUE = 4 * catalogue.MAX_PROMPT_CHARS


def parse_query(query: dict, models: tuple[str, ...] = ()) -> tuple[dict, list[str]]:
    """Query parameters -> (control values, problems). Only keys present in the query are returned."""
    out, problems = {}, []
    for key, raw in query.items():
        key, raw = ALIASES.get(str(key), str(key)), str(raw)[:MAX_QUERY_VALUE]
        if key in GRADIO_KEYS:
            continue
        if key == "prompt":
            out["prompt"] = raw[:catalogue.MAX_PROMPT_CHARS]
        elif key == "decoder":
            if raw in catalogue.DECODERS:
                out["decoder"] = raw
            else:
                problems.append(f"decoder={raw[:40]!r} is not one of {', '.join(catalogue.DECODERS)}")
        elif key == "model":
            if raw in models:
                out["model"] = raw
            else:
                problems.append(f"model={raw[:40]!r} is not offered here")
        elif key == "branch":
            try:
                how, spec = parse_branch(raw)
                if spec:                    # its spec too, before the base run is decoded
                    catalogue.validate(*parse_spec(spec), page=True)
                out["branch"] = branch_json(how, spec)
            except ConfigError as e:
                problems.append(f"branch: {e}"[:200])
        elif key == "tab":                  # the view tab to open once the run is shown (if it fills it)
            if raw in TABS:
                out["tab"] = raw
            else:
                problems.append(f"tab={raw[:40]!r} is not one of {', '.join(TABS)}")
        elif key == "trace":                # one of the operator's recorded traces, by name (explorer.recorded)
            out["trace"] = raw[:120]
        elif key in ("step", "pos"):
            try:
                out[key] = min(max(int(key == "step"), int(raw)), 1_000_000)
            except ValueError:
                problems.append(f"{key}={raw[:40]!r} is not a number")
        elif key in catalogue.PARAMS:
            p = catalogue.shared_param(key)
            try:
                value = p.coerce(raw)
                if p.choices:
                    p.check(value)
            except ConfigError as e:
                problems.append(str(e))
                continue
            out[key] = p.clamp(value)
            if out[key] != value:           # a link's visitor asked for this value: say it was not the one used
                problems.append(f"{key}={raw[:40]!r} is outside {p.interval(page=True)} on this page: "
                                f"{out[key]} used")
        else:
            problems.append(f"unknown parameter {key[:40]!r}")
    return out, problems


def to_query(values: dict) -> str:
    """Control values -> query string (only recognised keys, booleans as 0/1)."""
    items = {}
    for key, val in values.items():
        if key in PAGE_KEYS or key in catalogue.PARAMS:
            items[key] = int(val) if isinstance(val, bool) else val
    return urlencode(items)
