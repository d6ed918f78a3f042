"""Fast-dLLM v2's sub-blocks's card (torch-free): what the decoder adds besides its rule (engine.catalogue.cards)."""

from __future__ import annotations

from engine.catalogue.cards import Card
from engine.catalogue.params import COMMON, Decoder, Param


CARD = Card(
    decoder=Decoder("subblock",
        "**Sub-block** (Fast-dLLM v2): the block is decoded sub-block by sub-block, left to right; "
        "in the current one every masked slot with p > τ is committed, and the most confident always. On a "
        "right-shifted model a block's first slot is predicted by the finished block's last row, alone.",
        COMMON + ("tau", "sub_block", "block_cache"),
        overrides={"top_p": dict(default=0.95, help="nucleus of the tempered distribution (Fast-dLLM v2: 0.95)")},
        rules=((lambda v: v["block_size"] % v["sub_block"] == 0,
        "block_size must be a multiple of sub_block"),),
        needs=("block_causal",), knob="tau", title="Sub-block (Fast-dLLM v2)", preview="tau"),
    menu=("Family's own sampler", "Fast-dLLM v2's sub-blocks"), rank=1,
    params={
        "sub_block": Param(int, 8, 1, 64, label="sub-block size",
            help="Fast-dLLM v2: the block is decoded sub-block by "
            "sub-block, left to right, the threshold rule inside the current one", step=1, page=(1, 32),
            group="subblock"),
        "block_cache": Param(bool, False, label="block cache (second level)",
            help="Fast-dLLM v2: a sub-block whose first "
            "slot is decided runs alone against the block's stale K/V", group="subblock"),
    },
    glossary=(
        ("sub-block", "Fast-dLLM v2: the block is decoded in sub-blocks left to right, the threshold rule inside the current one"),
    ),
)
