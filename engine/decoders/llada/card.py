"""LLaDA fixed steps's card (torch-free): what the decoder adds besides its rule (engine.catalogue.cards)."""

from __future__ import annotations

from engine.catalogue.cards import Card, Example, SweepPreset
from engine.catalogue.params import COMMON, Decoder, Param


CARD = Card(
    decoder=Decoder("llada",
        "**LLaDA** fixed steps: each block gets `steps` forwards; the most confident tokens are kept.",
        COMMON + ("steps", "remasking", "precision"), title="LLaDA"),
    menu=('Baseline', 'fixed steps per block (LLaDA)'), rank=1,
    params={
        "remasking": Param(str, "low_confidence", choices=("low_confidence", "random"), label="Remasking (LLaDA)",
            help="which tokens a step keeps", group="llada"),
        "precision": Param(str, "float64", choices=("float64", "model"), label="Confidence precision",
            help="float64: the confidences ranked in float64 (Fast-dLLM's cast, LLaDA's current generate.py); "
            "model: in the logits' own dtype over the whole canvas, as generate.py as first released ranks "
            "F.softmax(logits) (bf16 confidences tie often; torch's topk breaks the ties)",
            group="llada"),
    },
    sweeps=(SweepPreset("llada", ("llada:steps={b}",), "steps = B"),
            # ParallelBench's question on the page: run it on copy, then on shuffle (unmask-parallel-small)
            SweepPreset("parallelism vs dependence", ("llada:steps={b}", "llada:steps=2", "llada:steps=1",
                                                      "threshold:tau={t}"),
                        "one token a forward, half or all the block in one, and the threshold rule at each τ")),
    glossary=(
        ("LLaDA fixed steps", "each block gets `steps` forwards; each commits its share of the most confident tokens"),
    ),
    example=Example(dict(block_size=8, steps=8), "arith", problems=1),
)
