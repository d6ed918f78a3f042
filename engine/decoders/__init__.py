"""Decoder registry: ``build_decoder(name, **params)`` validates against the catalogue and returns a policy.

A decoder is a folder ``<name>/`` with ``policy.py`` (its ``Policy``) and a torch-free ``card.py``
(a ``Card``, ``engine.catalogue.cards``, which the ground floor reads) that carries its catalogue entry, parameters, menu words and whatever else it adds; helpers of its own live beside
them (S2D2's routers, TSPD's Kalman filter), helpers shared by several rules in ``schedule.py``. Importing this
package is torch-free, so the cards can be read by the page; the policies load on first use.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache

from engine.catalogue.spec import parse_spec  # noqa: F401  (re-exported: engine.decoders.parse_spec)


@lru_cache(maxsize=None)
def policies() -> dict:
    """Every Policy defined in this package's folders (``<name>/policy.py``), by name: nothing to register here."""
    from engine.catalogue import catalogue
    from engine.runtime.loop import Policy
    found = {}
    for m in pkgutil.iter_modules(__path__):
        if not m.ispkg:
            continue
        mod = importlib.import_module(f"{__name__}.{m.name}.policy")
        for obj in vars(mod).values():
            if isinstance(obj, type) and issubclass(obj, Policy) and obj.__module__ == mod.__name__:
                found[obj.name] = obj
    assert set(found) == set(catalogue.DECODERS), "every catalogue decoder has a policy and vice versa"
    assert all(p.revises == catalogue.DECODERS[n].revises for n, p in found.items()), "revises: policy = catalogue"
    return found


def __getattr__(name: str):
    if name == "DECODERS":          # engine.decoders.DECODERS: the policies by name (loaded on first use)
        return policies()
    raise AttributeError(name)


def build_decoder(name: str, page: bool = False, **params):
    """A validated policy; unknown decoders, unknown keys and bad values raise ConfigError. ``page``: also hold
    the values to the public page's narrower limits (SPECs typed in the page)."""
    from engine.catalogue import catalogue
    typed = catalogue.validate(name, params, page=page)
    cls = policies()[name]
    return cls(cls.config_cls(**typed))
