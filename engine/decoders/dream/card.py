"""Dream's sampler's card (torch-free): what the decoder adds besides its rule (engine.catalogue.cards)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.catalogue.cards import Card, ViewEntry
from engine.catalogue.params import COMMON, Decoder, Param


@dataclass(frozen=True)
class DreamFields:
    dream_score: np.ndarray       # (L,) each masked slot's score under `alg` (NaN elsewhere or not scored)
    alg: str


CARD = Card(
    decoder=Decoder("dream", "**Dream's sampler** (`diffusion_generate`): the whole answer as one block and `steps` "
        "forwards over timesteps from 1 to eps; each step reveals int(n_masked · (1 − s/t)) masked slots, the "
        "best by `alg`'s score (or drawn with alg_temp), or each slot with chance 1 − s/t (`origin`).",
        tuple(k for k in COMMON if k != "block_size") + ("steps", "alg", "alg_temp", "eps"),
        overrides={"steps": dict(label="Steps (0 = one per token)", help="forwards over the whole answer")},
        needs=("full",), title="Dream's sampler"),
    menu=("Family's own sampler", "Dream's diffusion_generate"), rank=0,
    params={
        "alg": Param(str, "entropy", choices=("origin", "maskgit_plus", "topk_margin", "entropy"),
            label="Dream's score",
            help="which masked slots a step reveals: origin at random (1 − s/t each), else the best by p, the top-2 "
            "margin or minus the entropy", group="dream"),
        "alg_temp": Param(float, 0.0, 0.0, 100.0, label="alg_temp (0 = the top ones)",
            help="> 0: draw the slots to reveal from softmax(score / alg_temp)", step=0.05, page=(0.0, 5.0),
            group="dream"),
        "eps": Param(float, 1e-3, 0.0, 1.0, open_lo=True, open_hi=True, label="eps (last timestep)",
            help="timesteps linspace(1, eps, steps + 1)", step=0.001, group="dream"),
    },
    records={"draft": DreamFields},
    views=(ViewEntry("dream", "Dream: the step's ranking", "Revisions", "explorer.views.dream:ranking",
                     "explorer.views.dream", "server"),),
    shows=(DreamFields,),
    glossary=(
        ("Dream's score (alg)", "which masked slots a `dream` step reveals: the best by p (maskgit_plus), by top-2 margin (topk_margin) or by minus the entropy (entropy), or at random (origin)"),
    ),
)
