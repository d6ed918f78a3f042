"""Token editing's card (torch-free): what the decoder adds besides its rule (engine.catalogue.cards)."""

from __future__ import annotations

from engine.catalogue.cards import Card, Example
from engine.catalogue.params import COMMON, Decoder, Param


CARD = Card(
    decoder=Decoder("edit",
        "**Token editing** (LLaDA2.1's joint threshold): fill masks whose p > τ and, in the same forward, "
        "rewrite a written token of the block when the model prefers another with p > τ_edit; a finished block "
        "is checked again in the next block's first forward (ours), and edit-only forwards per block are "
        "optional.", COMMON + ("tau", "tau_edit", "post_steps", "check_next"),
        knob="tau", title="Token editing (joint threshold)", revises=True, preview="tau"),
    menu=('Changes its mind', 'token editing: rewrite written tokens'), rank=0,
    reference_defaults={   # SGLang's LLaDA2.1 joint-threshold sampler
        "tau": (0.5, "0.9 keeps the embedded models' parallel fill as sure as the threshold rule's default, so the "
                "page compares editing against the same commit bar"),
        "tau_edit": (0.0, "0 rewrites a written token whenever another is the argmax; 0.7 asks the model to be "
                     "sure before it changes its mind, which our 3.5 M model needs (it would flip-flop at 0)"),
        "post_steps": (16, "our check of a finished block in the next block's first forward (check_next) does the "
                       "same work at no extra forward; 16 edit-only forwards a block would dominate NFE here"),
    },
    params={
        "tau_edit": Param(float, 0.7, 0.0, 1.0, label="τ_edit (token-to-token)",
            help="rewrite a written token when the "
            "model prefers another with p > τ_edit", step=0.01, group="edit"),
        "post_steps": Param(int, 0, 0, 16, label="post-block edit steps",
            help="edit-only forwards once a block is full",
            step=1, page=(0, 8), group="edit"),
        "check_next": Param(bool, True, label="edit the previous block in the next one's first forward",
            help="T2T on a finished block at no extra forward (ours); off: the reference's post steps only",
            group="edit"),
    },
    glossary=(
        ("edit (τ_edit)", "LLaDA2.1's token-to-token rule: a written token is rewritten when the model prefers another with p > τ_edit; *post-block edit steps* are forwards after a block is full that only edit"),
    ),
    example=Example(dict(block_size=8, temperature=1.0), "story", shows="turned_right"),
)
