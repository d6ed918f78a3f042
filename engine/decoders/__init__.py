"""Decoder registry and the SPEC syntax shared by the CLI, the bench and the app: ``name`` or ``name:k=v,...``."""

from __future__ import annotations

import dataclasses

from engine.decoders.ar import ARPolicy
from engine.decoders.llada import LLaDAPolicy
from engine.decoders.s2d2 import S2D2Policy
from engine.decoders.threshold import ThresholdPolicy
from engine.decoders.tspd import TSPDPolicy
from engine.errors import ConfigError
from engine.loop import Policy
from engine.spec import parse_spec  # noqa: F401  (re-exported: engine.decoders.parse_spec)

DECODERS: dict[str, type[Policy]] = {p.name: p for p in (ARPolicy, LLaDAPolicy, ThresholdPolicy, S2D2Policy,
                                                         TSPDPolicy)}


def _coerce(field: dataclasses.Field, raw):
    if not isinstance(raw, str):
        return raw
    t = field.type if isinstance(field.type, str) else field.type.__name__
    try:
        if "bool" in t:
            if raw.lower() in ("1", "true", "yes", "on"):
                return True
            if raw.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
        if "int" in t and "float" not in t:
            return int(raw)
        if "float" in t:
            return float(raw)
    except ValueError:
        raise ConfigError(f"{field.name}={raw!r} is not a valid {t}") from None
    return raw


def build_decoder(name: str, **params) -> Policy:
    """A validated policy; unknown decoders, unknown keys and bad values raise ConfigError."""
    if name not in DECODERS:
        raise ConfigError(f"unknown decoder {name!r}; known: {', '.join(sorted(DECODERS))}")
    cls = DECODERS[name]
    fields = {f.name: f for f in dataclasses.fields(cls.config_cls)}
    unknown = sorted(set(params) - set(fields))
    if unknown:
        raise ConfigError(f"unknown parameter(s) for {name}: {', '.join(unknown)}; known: {', '.join(sorted(fields))}")
    params = {k: _coerce(fields[k], v) for k, v in params.items() if v is not None}
    preset = params.get("preset")
    if preset:  # a named preset supplies defaults; explicit parameters still win
        presets = getattr(cls, "presets", {})
        if preset not in presets:
            raise ConfigError(f"unknown preset {preset!r} for {name}; known: {', '.join(presets) or 'none'}")
        params = {**presets[preset], **params}
    cfg = cls.config_cls(**params)
    return cls(cfg)
