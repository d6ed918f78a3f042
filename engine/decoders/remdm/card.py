"""ReMDM's card (torch-free): what the decoder adds besides its rule (engine.catalogue.cards)."""

from __future__ import annotations

from engine.catalogue.cards import Card, Example
from engine.catalogue.params import COMMON, Decoder, Param


CARD = Card(
    decoder=Decoder("remdm", "**ReMDM** remasking (the released remdm-cap / remdm-conf samplers): fixed steps over "
        "timesteps t = 1 … 1/S; each step draws, per written token of the block, whether it goes back to [MASK] "
        "(σ capped by η, or weighted by how unsure it was when unmasked); a re-masked slot waits for a later "
        "step.", COMMON + ("steps", "eta", "remask"), knob="eta", title="ReMDM: remasking",
        revises=True),
    menu=('Changes its mind', 'ReMDM: send tokens back to [MASK]'), rank=2,
    reference_defaults={   # the released remdm-cap script
        "eta": (0.008, "the reference's 0.008 re-masks about one token in a thousand steps of its 1 024-token "
                "canvas; on a block of 8 over a few steps it would almost never act, so the page's default (0.1) "
                "makes the remasking visible; set 0.008 to decode as the script does"),
    },
    params={
        "eta": Param(float, 0.1, 0.0, 0.5, label="η (remasking cap)", help="remdm-cap: each written token goes back to "
            "[MASK] with σ = min(η, (1 − α_s)/α_t)", step=0.01, group="remdm"),
        "remask": Param(str, "cap", choices=("cap", "conf"), label="ReMDM schedule",
            help="cap: σ = min(η, (1 − α_s)/α_t) "
            "per written token; conf: σ_max · softmax(−p at unmasking) over the block's written tokens",
            group="remdm"),
    },
    glossary=(
        ("ReMDM", "remasking diffusion: each step may send the least supported written tokens (a share η) back to `[MASK]`"),
    ),
    example=Example(dict(block_size=8, temperature=1.0), "story", shows="revises"),
)
