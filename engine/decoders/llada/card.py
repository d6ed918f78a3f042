"""LLaDA fixed steps's card (torch-free): what the decoder adds besides its rule (engine.decoders.cards)."""

from __future__ import annotations

from engine.decoders.cards import Card, SweepPreset
from engine.decoders.params import COMMON, Decoder, Param


CARD = Card(
    decoder=Decoder("llada",
        "**LLaDA** fixed steps: each block gets `steps` forwards; the most confident tokens are kept.",
        COMMON + ("steps", "remasking"), title="LLaDA"),
    menu=('Baseline', 'fixed steps per block (LLaDA)'), rank=1,
    params={
        "remasking": Param(str, "low_confidence", choices=("low_confidence", "random"), label="Remasking (LLaDA)",
            help="which tokens a step keeps", group="llada"),
    },
    sweeps=(SweepPreset("llada", ("llada:steps={b}",), "steps = B"),),
)
