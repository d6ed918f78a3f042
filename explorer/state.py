"""Controls <-> URL query parameters, so a link reproduces a run: ``?decoder=s2d2&tau=0.85&block=4&prompt=...``.

Values are parsed by the type of each control's default and clamped to the control's range; unknown keys and
unparsable values are ignored (and reported), never fatal.
"""

from __future__ import annotations

from urllib.parse import urlencode

# key: (default, (min, max) or choices)
CONTROLS: dict[str, tuple] = {
    "decoder": ("threshold", ("threshold", "llada", "ar", "s2d2", "tspd")),
    "tau": (0.9, (0.05, 1.0)),
    "block": (8, (1, 32)),
    "steps": (8, (1, 32)),
    "gen_length": (64, (8, 192)),
    "router": ("score", ("score", "always", "never", "span", "hysteresis", "ucb")),
    "estimator": ("entropy", ("entropy", "margin", "hard_entropy", "confidence", "linear_margin", "renyi2")),
    "beta": (1.0, (0.0, 5.0)),
    "cost": (1.0, (0.0, 8.0)),
    "score_type": ("static", ("static", "dynamic")),
    "tau_score": (0.0, (-5.0, 5.0)),
    "tau_span": (2, (1, 32)),
    "tau_on": (1.0, (-5.0, 5.0)),
    "tau_off": (-2.0, (-8.0, 4.0)),
    "acceptance": ("stochastic", ("stochastic", "greedy")),
    "draft_ver": (False, None),
    "cache_ver": (False, None),
    "controller": ("mlp", ("mlp", "heuristic")),
    "ce": (True, None),
    "kappa": (1.64, (0.0, 4.0)),
    "h_max": (4, (0, 8)),
    "tau_s": (0.0, (0.0, 0.99)),
    "temperature": (0.0, (0.0, 2.0)),
    "seed": (0, (0, 2**31 - 1)),
}


def parse_query(query: dict) -> tuple[dict, list[str]]:
    """Query parameters -> (control values, problems). Only keys present in the query are returned."""
    out, problems = {}, []
    if "prompt" in query:
        out["prompt"] = str(query["prompt"])[:4000]
    for key, raw in query.items():
        if key in ("prompt", "__theme", "view", "step"):
            continue
        if key not in CONTROLS:
            problems.append(f"unknown parameter {key!r}")
            continue
        default, dom = CONTROLS[key]
        try:
            if isinstance(default, bool):
                if raw.lower() not in ("1", "0", "true", "false"):
                    raise ValueError(raw)
                val = raw.lower() in ("1", "true")
            elif isinstance(default, int):
                val = int(float(raw))
            elif isinstance(default, float):
                val = float(raw)
            else:
                val = str(raw)
        except ValueError:
            problems.append(f"{key}={raw!r} is not a valid value")
            continue
        if isinstance(dom, tuple) and dom and isinstance(dom[0], str):
            if val not in dom:
                problems.append(f"{key}={raw!r} is not one of {', '.join(dom)}")
                continue
        elif dom is not None and not isinstance(default, bool):
            val = type(default)(min(max(val, dom[0]), dom[1]))
        out[key] = val
    if "step" in query:
        try:
            out["step"] = max(1, int(query["step"]))
        except ValueError:
            problems.append(f"step={query['step']!r} is not a number")
    return out, problems


def to_query(values: dict) -> str:
    """Control values -> query string (only recognised keys, booleans as 0/1)."""
    items = {}
    for key, val in values.items():
        if key != "prompt" and key != "step" and key not in CONTROLS:
            continue
        items[key] = int(val) if isinstance(val, bool) else val
    return urlencode(items)
