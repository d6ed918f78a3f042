"""Credit decoding's card (torch-free): its catalogue entry, parameters, record fields, view and words."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.catalogue.cards import Card, Example, ViewEntry
from engine.catalogue.params import COMMON, Decoder, Param


@dataclass(frozen=True)
class CreditFields:
    credit: np.ndarray        # (L,) the block's credit C[i, x̂_i] of each masked slot's candidate (NaN elsewhere)
    credit_boost: np.ndarray  # (L,) α · log(1 + C[i, x̂_i]): what the credit added to the candidate's logit
    raw_conf: np.ndarray      # (L,) the candidate's p without the credit (the record's confidence is the fused p)


CARD = Card(
    decoder=Decoder(
        "credit", "**Credit decoding** (dInfer's `CreditThresholdParallelDecoder`): each forward adds, per masked "
        "slot, p₁^γ to the credit of its top-1 token, after decaying the block's credit by β; the logits get "
        "α · log(1 + credit) and the threshold rule (p ≥ τ, at least the best) reads the fused distribution. Where "
        "we chose: [MASK] is never a candidate (dInfer skips a slot whose argmax is [MASK]).",
        COMMON + ("tau", "credit_alpha", "credit_gamma", "credit_beta"), knob="tau", title="Credit decoding"),
    rank=1,
    menu=("Trajectory", "credit: evidence accumulated over forwards"),
    params={
        "credit_alpha": Param(float, 0.7, 0.0, 10.0, label="α (credit weight)", help="fused logits = logits + "
                              "α · log(1 + credit) (dInfer: 0.7)", step=0.05, page=(0.0, 4.0), group="credit"),
        "credit_gamma": Param(float, 0.2, 0.0, 10.0, label="γ (boost exponent)", help="each forward adds p₁^γ to "
                              "the top-1 token's credit (dInfer: 0.2)", step=0.05, page=(0.0, 4.0), group="credit"),
        "credit_beta": Param(float, 0.8, 0.0, 1.0, label="β (decay)", help="the credit is multiplied by β before "
                             "each forward after the block's first (dInfer: 0.8)", step=0.01, group="credit"),
    },
    records={"draft": CreditFields},
    views=(ViewEntry("credit", "Credit: the evidence behind each candidate", "Credit",
                     "explorer.views.rivals:credit_map", "explorer.views.rivals"),),
    shows=(CreditFields,),
    tab_note="Credit decoding adds to each candidate's logit the evidence of the block's earlier forwards (dInfer).",
    glossary=(("credit (dInfer)", "per slot and token, a decaying sum of p₁^γ over the block's forwards in which "
                                  "the token was top-1; α · log(1 + credit) is added to its logit"),),
    example=Example(dict(block_size=8, temperature=1.0, tau=0.7), "story"),
)
