"""The uniform-noise canvas's card (DiffusionGemma): what the decoder adds besides its rule."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.catalogue.cards import BenchCounts, Card, Example, RunSummary, ViewEntry
from engine.decoders.eb.card import EBFields
from engine.catalogue.params import Decoder, Param


@dataclass(frozen=True)
class UniformFields(EBFields):     # with EB's acceptance of the canvas
    denoised: np.ndarray          # (L,) the step's sample at every slot (multinomial at the step's temperature)
    temperature: float            # t_min + (t_max − t_min) · n / N at remaining step n of N
    stable: bool                  # the argmax canvas equals each of the last `stability_threshold` ones
    confident: bool               # mean entropy (nats, tempered) < confidence_threshold
    mean_entropy: float
    confidence_threshold: float


def counts(trace) -> dict:
    """Canvases made, denoising steps, and the slots each step renoised (every slot is sampled, none masked)."""
    steps = [r for r in trace.records if r.has("denoised")]
    return dict(canvases=sum(r.kind == "encode" for r in trace.records), denoise_steps=len(steps),
                canvas_slots=sum(len(r.positions) for r in steps),
                renoised=sum(int((~r.committed).sum()) for r in steps))


def columns(a, done: int) -> dict:
    """Denoising steps per canvas, and the share of slots given fresh noise per step."""
    if not a["canvases"]:
        return {}
    return dict(denoise_steps_per_canvas=a["denoise_steps"] / a["canvases"],
                renoised_share=a["renoised"] / max(1, a["canvas_slots"]))


@dataclass(frozen=True)
class UniformSummary(RunSummary):
    """The canvas's settings as the run used them (the model's own where the page left 0 or -1)."""
    canvas_length: int = 0
    max_denoising_steps: int = 0
    entropy_bound: float = 0.0
    t_min: float = 0.0
    t_max: float = 0.0
    stability_threshold: int = 0
    confidence_threshold: float = 0.0


CARD = Card(
    decoder=Decoder("uniform",
        "**Uniform-noise canvas** (DiffusionGemma): a canvas of random tokens; each step samples "
        "every slot under a temperature falling from t_max to t_min, keeps the lowest-entropy samples within "
        "the entropy bound γ, replaces the rest with fresh random tokens and feeds its logits to the next step "
        "(self-conditioning). A canvas stops when its argmax is stable and its mean entropy low.",
        ("gen_length", "seed", "stop_at_eos", "max_denoising_steps", "entropy_bound", "t_min", "t_max",
        "stability_threshold", "confidence_threshold"),
        overrides={"entropy_bound": dict(default=0.0, open_lo=False, page=(0.0, 5.0),
        label="γ (entropy bound; 0 = the model's)")},
        rules=((lambda v: not (v["t_min"] and v["t_max"]) or v["t_max"] > v["t_min"],
        "t_max must be greater than t_min"),),
        needs=("canvas",), title="Uniform canvas (DiffusionGemma)"),
    menu=("Family's own sampler", "DiffusionGemma's uniform-noise canvas"), rank=2,
    params={
        "max_denoising_steps": Param(int, 0, 0, 1024, label="denoising steps per canvas (0 = the model's)",
            help="most decoder forwards per canvas (DiffusionGemma's default 48)", step=1,
            page=(0, 128), group="uniform"),
        "t_min": Param(float, 0.0, 0.0, 5.0, label="t_min, last step's temperature (0 = the model's)",
            help="the schedule falls linearly from t_max to t_min", step=0.05, page=(0.0, 2.0), group="uniform"),
        "t_max": Param(float, 0.0, 0.0, 5.0, label="t_max, first step's temperature (0 = the model's)",
            help="the schedule falls linearly from t_max to t_min", step=0.05, page=(0.0, 2.0), group="uniform"),
        "stability_threshold": Param(int, -1, -1, 64, label="stability steps (−1 = the model's)",
            help="steps the argmax canvas must stay unchanged before a canvas may stop", step=1,
            page=(-1, 16), group="uniform"),
        "confidence_threshold": Param(float, 0.0, 0.0, 100.0, label="confidence threshold (0 = the model's)",
            help="a canvas may stop once its mean entropy (nats, tempered) is below it",
            step=0.001, page=(0.0, 1.0), group="uniform"),
    },
    records={"draft": UniformFields},
    summary_type=UniformSummary,
    bench=BenchCounts(counts, columns, ("denoise_steps_per_canvas", "renoised_share")),
    views=(ViewEntry("canvas", "The canvas, step by step", "Canvas", "explorer.views.canvas:canvas_map"),
           ViewEntry("stopping", "Stopping test", "Canvas", "explorer.views.canvas:stopping"),
           ViewEntry("canvas_eb", "Sorted entropies and the bound", "Canvas", "explorer.views.revise:eb_prefix",
                     scrub="server"),
           ViewEntry("canvas_history", "Token history of the selected position", "Canvas",
                     "explorer.views.revise:token_history", "explorer.views.canvas", "server")),
    shows=(UniformFields,),
    hides=("Decode", "Revisions"),       # a canvas has no [MASK] slots: its own maps show the commits
    tab_note="The uniform-noise decoder of DiffusionGemma: the canvas starts as random tokens and every step keeps "
             "the lowest-entropy samples within the bound γ, renoising the rest.",
    glossary=(
        ("canvas (uniform noise)", "DiffusionGemma: a block of `canvas_length` slots that starts as random tokens, not [MASK]s; each step samples every slot, **keeps** the samples inside the entropy bound and **renoises** the rest with fresh random tokens"),
        ("self-conditioning", "DiffusionGemma feeds each step's (tempered) logits to the next step as a soft embedding added to the canvas's"),
        ("stopping test", "a canvas ends when its argmax is unchanged for `stability_threshold` steps and its mean entropy is below `confidence_threshold`, or after `max_denoising_steps`"),
        ("noise / kept", "on a uniform canvas a slot holds a random token (noise, struck-through grey in the text) until the entropy bound keeps its sample"),
    ),
    example=Example(dict(), "arith", model="unmask-uniform-small", shows="right"),
)
