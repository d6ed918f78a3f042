"""Decoder registry: ``build_decoder(name, **params)`` validates against the catalogue and returns a policy."""

from __future__ import annotations

import importlib
import pkgutil

from engine import catalogue
from engine.loop import Policy
from engine.spec import parse_spec  # noqa: F401  (re-exported: engine.decoders.parse_spec)


def _policies() -> dict[str, type[Policy]]:
    """Every Policy defined in this package's modules, by name: a new decoder is its module plus its catalogue
    entry, with nothing to register here."""
    found = {}
    for m in pkgutil.iter_modules(__path__):
        mod = importlib.import_module(f"{__name__}.{m.name}")
        for obj in vars(mod).values():
            if isinstance(obj, type) and issubclass(obj, Policy) and obj.__module__ == mod.__name__:
                found[obj.name] = obj
    return found


DECODERS: dict[str, type[Policy]] = _policies()
assert set(DECODERS) == set(catalogue.DECODERS), "every catalogue decoder has a policy and vice versa"
assert all(p.revises == catalogue.DECODERS[n].revises for n, p in DECODERS.items()), "revises: policy = catalogue"


def build_decoder(name: str, page: bool = False, **params) -> Policy:
    """A validated policy; unknown decoders, unknown keys and bad values raise ConfigError. ``page``: also hold
    the values to the public page's narrower limits (SPECs typed in the page)."""
    typed = catalogue.validate(name, params, page=page)
    cls = DECODERS[name]
    return cls(cls.config_cls(**typed))
