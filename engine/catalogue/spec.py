"""The decoder SPEC syntax shared by the CLI, the bench and the app: ``name`` or ``name:key=value,...``."""

from __future__ import annotations

from engine.errors import ConfigError


def parse_spec(spec: str) -> tuple[str, dict]:
    """'threshold:tau=0.9,block_size=8' -> ('threshold', {'tau': '0.9', 'block_size': '8'})."""
    if not isinstance(spec, str):
        raise ConfigError("a decoder spec is text: name or name:key=value,...")
    name, _, rest = spec.partition(":")
    params = {}
    for item in filter(None, (s.strip() for s in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise ConfigError(f"bad decoder spec item {item!r}: expected key=value")
        params[key.strip().replace("-", "_")] = value.strip()
    return name.strip(), params
