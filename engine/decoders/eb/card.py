"""EB's card (torch-free): what the decoder adds besides its rule (engine.catalogue.cards)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.catalogue.cards import Card, Example, ReasonEntry, ViewEntry
from engine.catalogue.params import COMMON, Decoder


@dataclass(frozen=True)
class EBFields:
    entropy_nats: np.ndarray      # (L,) entropy in nats of each masked slot's sampling distribution (NaN elsewhere)
    eb_order: np.ndarray          # (L,) rank of each masked slot by entropy, lowest first (-1 elsewhere)
    eb_bound: np.ndarray          # (L,) at each rank: cumulative entropy minus the largest, the bound's left side
    gamma: float


CARD = Card(
    decoder=Decoder("eb",
        "**EB** entropy-bounded: commit the lowest-entropy masked slots while Σ H − max H ≤ γ, a bound on "
        "their mutual dependence.", COMMON + ("entropy_bound",), knob="entropy_bound", title="EB: entropy bound",
        preview="entropy_bound"),
    menu=('Baseline', 'entropy bound γ (EB sampler)'), rank=3,
    records={"draft": EBFields},
    views=(ViewEntry("eb", "EB: sorted entropies and the bound", "Revisions", "explorer.views.revise:eb_prefix",
                     scrub="server"),),
    shows=(EBFields,),
    reasons={
        "ENTROPY_BOUND": ReasonEntry(12, "EB entropy bound", "#8c6d31", "eb"),   # within the entropy bound's prefix
    },
    glossary=(
        ("EB, γ", "entropy-bounded commits: the lowest-entropy slots while Σ H − max H ≤ γ, a bound on their mutual dependence (also DiffusionGemma's sampler)"),
    ),
    example=Example(dict(block_size=8, temperature=1.0), "story"),
)
