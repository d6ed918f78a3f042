"""SimSD's card (torch-free): what the decoder adds besides its rule (engine.decoders.cards)."""

from __future__ import annotations

from typing import TypedDict

import numpy as np

from engine.decoders.cards import Card, ViewEntry
from engine.decoders.params import COMMON, Decoder, Param


class SimSDDraftFields(TypedDict):
    draft_tokens: np.ndarray      # (L,) the block as the drafter has revealed it so far ([MASK] where not yet)
    step_of: np.ndarray           # (L,) reveal step t of each drafted slot (1-based; 0 = not drafted this round)


class SimSDVerifyFields(TypedDict):
    attn_mask: np.ndarray         # (L + n, L + n) bool: the verification mask over [block | mask copies]
    draft_tokens: np.ndarray      # (L,) the drafted block
    step_of: np.ndarray           # (L,) reveal steps
    q_top: np.ndarray             # (L,) the target's argmax at each drafted slot (-1 elsewhere)
    accepted: int                 # accepted prefix length
    rejected_at: int | None       # absolute position of the first rejection
    resampled: int | None         # the bonus token committed there
    span: list                    # [first drafted absolute position, number of drafted slots]
    verdict: np.ndarray           # (L,) Verdict codes
    ratio: np.ndarray             # (L,) acceptance ratio (greedy: 1 match / 0 mismatch)
    p_draft: np.ndarray           # (L,) the drafter's p(d) at its reveal step
    q_draft: np.ndarray           # (L,) the target's q(d)


CARD = Card(
    decoder=Decoder("simsd",
        "**SimSD** two-model speculation: a small drafter denoises the block, recording when it revealed "
        "each slot; the target checks every draft in one forward through a temporal attention mask.",
        COMMON + ("drafter", "acceptance", "mask", "draft_steps", "reveal", "tau"),
        overrides={"acceptance": dict(choices=("greedy", "mrs"), default="greedy",
        help="greedy: argmax match; mrs: min(1, q/p) + residual, a bonus token (biased with a greedy "
        "drafter, temperature 0: the trace says so)")},
        needs=("block_causal", "no_shift"), knob="tau", title="SimSD: drafter and verification",
        resources=("drafter",)),
    menu=('Speculative', 'SimSD: a small drafter, the target verifies'), rank=1,
    params={
        "drafter": Param(str, "", label="Drafter", help="the small drafting model; empty = the target's paired drafter "
            "(on the page only embedded models)", group="simsd", model=True),
        "mask": Param(str, "released", choices=("released", "simplified"), label="Verification mask",
            help="released: the temporal mask of the SimSD code; simplified: each copy sees the drafts revealed before it (an early write-up's reading)",
            group="simsd"),
        "draft_steps": Param(int, 0, 0, 64, label="Drafter steps S (0 = B)", help="drafter forwards per round", step=1,
            page=(0, 32), group="simsd"),
        "reveal": Param(str, "static", choices=("static", "dynamic"), label="Drafter reveal rule",
            help="static: top-k per step; dynamic: every c > τ if at least k", group="simsd"),
    },
    records={"draft": SimSDDraftFields, "verify": SimSDVerifyFields},
    views=(ViewEntry("simsd", "Reveal order and verdicts", "SimSD", "explorer.views.simsd:simsd_rounds",
                     "explorer.views.simsd", "server"),),
    shows=("step_of",),
    tab_note="The round's temporal mask is the attention view in the S2D2 tab.",
)
