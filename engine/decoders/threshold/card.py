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
    # the page opens on it: a story at T = 1 whose text changes when τ is dragged to its low end
    example=Example(dict(block_size=8, tau=0.9, temperature=1.0), "story", problems=1),
)
