"""WINO's card (torch-free): what the decoder adds besides its rule (engine.catalogue.cards)."""

from __future__ import annotations

from dataclasses import dataclass

from engine.catalogue.cards import Card, Example, ViewEntry
from engine.catalogue.params import COMMON, Decoder, Param


@dataclass(frozen=True)
class WinoFields:
    drafted: int                  # slots drafted at the wide threshold this forward
    rejected: int                 # drafted slots re-masked at the narrow threshold this forward


CARD = Card(
    decoder=Decoder("wino",
        "**WINO** wide-in, narrow-out: draft every slot with p ≥ τ_wide, re-mask drafted tokens the "
        "next forward supports with p < τ_narrow.", COMMON + ("tau_wide", "tau_narrow"),
        knob="tau_wide", title="WINO: wide-in, narrow-out", revises=True),
    menu=('Changes its mind', 'WINO: wide in, narrow out'), rank=1,
    params={
        "tau_wide": Param(float, 0.6, 0.0, 1.0, open_lo=True, label="τ_wide (draft)", help="draft every slot with p ≥ "
            "τ_wide", step=0.01, page=(0.05, 1.0), group="wino"),
        "tau_narrow": Param(float, 0.9, 0.0, 1.0, label="τ_narrow (keep)", help="re-mask a drafted token whose p falls "
            "below τ_narrow", step=0.01, group="wino"),
    },
    records={"draft": WinoFields},
    views=(ViewEntry("wino", "WINO: drafted vs re-masked", "Revisions", "explorer.views.revise:wino_counts",
                     "explorer.views.revise"),),
    shows=(WinoFields,),
    glossary=(
        ("WINO", "wide-in, narrow-out: draft every slot with p ≥ τ_wide, re-mask a drafted token whose p falls below τ_narrow in a later forward"),
    ),
    # a wide draft (τ_wide 0.1 over a block of 32) and a strict keep (τ_narrow 0.95), so the example's verify step
    # re-masks: at the defaults (B 8, τ 0.6 / 0.9) this model supports every token it drafted, and nothing went back
    example=Example(dict(block_size=32, temperature=1.0, tau_wide=0.1, tau_narrow=0.95), "story", shows="revises"),
)
