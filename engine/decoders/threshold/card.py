"""The threshold rule's card (torch-free): what the decoder adds besides its rule (engine.catalogue.cards)."""

from __future__ import annotations

from engine.catalogue.cards import Card, Example
from engine.catalogue.params import COMMON, Decoder, Param


CARD = Card(
    decoder=Decoder("threshold",
        "**Threshold** (Fast-dLLM): commit every masked token with confidence ≥ τ, at least one "
        "per step.", COMMON + ("tau", "rule", "steps"), knob="tau", title="Threshold rule", preview="tau"),
    menu=('Baseline', 'confidence threshold τ (Fast-dLLM)'), rank=0,
    params={
        "rule": Param(str, "fastdllm", choices=("fastdllm", "sdar"), label="Threshold rule",
            help="fastdllm: all c ≥ τ (at least one); sdar: c > τ, else the step's quota", group="threshold"),
    },
    glossary=(
        ("threshold (Fast-dLLM)", "commit every masked token with confidence ≥ τ, and at least the most confident one"),
    ),
    # the page opens on it: a story at T = 1 whose text changes when τ is dragged to its low end, and where lowering
    # τ visibly marks more cells in the τ preview at many steps (bake_examples.previews). At τ 1 (one token a forward
    # but the certain ones): unmask-tasks-small's confidences are bimodal (at τ 1 on six stories, of the 1 007
    # cells scored while masked and not committed 696 were ≥ 0.99, 310 below 0.5, one in between), so at τ 0.9 the
    # waiting cells are all below 0.5 and a drag to 0.55 marked none; from τ 1 a drag to 0.99 marks 116.
    example=Example(dict(block_size=8, tau=1.0, temperature=1.0), "story", problems=1, shows="previews"),
)
