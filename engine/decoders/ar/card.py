"""Autoregressive's card (torch-free): what the decoder adds besides its rule (engine.catalogue.cards)."""

from __future__ import annotations

from engine.catalogue.cards import Card, Example
from engine.catalogue.params import COMMON, Decoder


CARD = Card(
    decoder=Decoder("ar", "**Autoregressive**: the same model with block size 1, one token per forward.", COMMON,
        overrides={"block_size": dict(default=1, lo=1, hi=1, page=(1, 1))}),
    menu=('Baseline', 'autoregressive, one token per forward'), rank=2,
    example=Example(dict(), "arith", problems=1),
)
