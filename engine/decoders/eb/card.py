"""EB's card (torch-free): its catalogue entry, parameters and menu words."""

from __future__ import annotations

from engine.cards import Card
from engine.params import COMMON, Decoder, Param  # noqa: F401

CARD = Card(
    decoder=Decoder("eb", "**EB** entropy-bounded: commit the lowest-entropy masked slots while Σ H − max H ≤ γ, a bound on "
        "their mutual dependence.", COMMON + ("entropy_bound",), knob="entropy_bound", title="EB: entropy bound"),
    menu=('Baseline', 'entropy bound γ (EB sampler)'), rank=3,
)
