"""Decoder registry: ``build_decoder(name, **params)`` validates against the catalogue and returns a policy."""

from __future__ import annotations

from engine import catalogue
from engine.decoders.ar import ARPolicy
from engine.decoders.eb import EBPolicy
from engine.decoders.edit import EditPolicy
from engine.decoders.llada import LLaDAPolicy
from engine.decoders.remdm import ReMDMPolicy
from engine.decoders.s2d2 import S2D2Policy
from engine.decoders.simsd import SimSDPolicy
from engine.decoders.threshold import ThresholdPolicy
from engine.decoders.tspd import TSPDPolicy
from engine.decoders.wino import WinoPolicy
from engine.loop import Policy
from engine.spec import parse_spec  # noqa: F401  (re-exported: engine.decoders.parse_spec)

DECODERS: dict[str, type[Policy]] = {p.name: p for p in (ARPolicy, LLaDAPolicy, ThresholdPolicy, S2D2Policy,
                                                         SimSDPolicy, TSPDPolicy, EditPolicy, WinoPolicy,
                                                         ReMDMPolicy, EBPolicy)}
assert set(DECODERS) == set(catalogue.DECODERS), "every catalogue decoder has a policy and vice versa"
assert all(p.revises == catalogue.DECODERS[n].revises for n, p in DECODERS.items()), "revises: policy = catalogue"


def build_decoder(name: str, page: bool = False, **params) -> Policy:
    """A validated policy; unknown decoders, unknown keys and bad values raise ConfigError. ``page``: also hold
    the values to the public page's narrower limits (SPECs typed in the page)."""
    typed = catalogue.validate(name, params, page=page)
    cls = DECODERS[name]
    return cls(cls.config_cls(**typed))
