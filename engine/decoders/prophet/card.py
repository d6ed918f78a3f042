"""Prophet's card (torch-free): its catalogue entry, parameters, commit reason, record fields, view and words."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.catalogue.cards import Card, Example, ReasonEntry, RunSummary, ViewEntry
from engine.catalogue.params import COMMON, Decoder, Param


@dataclass(frozen=True)
class ProphetFields:
    logit_gap: np.ndarray     # (L,) top-1 minus top-2 logit at each masked slot (NaN elsewhere)
    prophet_gap: float        # their mean over the block's masked slots: what the early-exit test reads
    prophet_bar: float        # the bar in force at this forward's phase (early, mid or late)
    progress: float           # forwards so far / the decode's nominal forwards (steps per block × blocks)
    exited: bool              # this forward commits the rest at once (the exit, or a block after it)


@dataclass(frozen=True)
class ProphetSummary(RunSummary):
    exit_forward: int | None = None   # the forward whose gap cleared its bar (None: the decode never exited)
    answer_window: list | None = None  # [first, end) absolute positions of the watched window (None: the block rule)


CARD = Card(
    decoder=Decoder(
        "prophet", "**Prophet** early commit (\"diffusion language models know the answer before decoding\"): LLaDA's "
        "fixed steps, until the mean top-2 logit gap of the block's masked slots clears a bar that falls with the "
        "decode's progress (early, mid, late); then every masked slot is committed at once. On a full-attention "
        "model (LLaDA, Dream) the exit forward fills every [MASK] of the canvas, as the reference does; a "
        "block-causal model's forward sees only its block, so there each later block is committed in its first "
        "forward (so is an exit in one of the dual cache's later forwards, which skip the rows after the block). Which "
        "slots' gap: prophet_window=answer follows the release's evaluation: \"The answer is\" is written into the "
        "response at answer_at and the gap is averaged over the 5 positions after it (answer_length; masked or "
        "not), every block running all its steps' forwards as the release does (even those that commit nothing: "
        "they count in NFE); prophet_window=block (the default: Unmask's tasks ask for no answer phrase, and a decoder cannot "
        "know the task) averages the block's still-masked slots, [EOS] filler included.",
            COMMON + ("steps", "gap_early", "gap_mid", "gap_late", "gap_scale", "prophet_window", "answer_at",
                      "answer_length"),
        knob="gap_scale", title="Prophet: early commit"),
    rank=3,
    menu=("Trajectory", "Prophet: commit the rest once the answer is clear"),
    params={
        "gap_early": Param(float, 7.5, 0.0, 100.0, label="gap bar, early phase", help="logit gap the exit needs "
                           "while progress < 0.33 (Prophet: 7.5)", step=0.1, page=(0.0, 20.0), group="prophet"),
        "gap_mid": Param(float, 5.0, 0.0, 100.0, label="gap bar, mid phase", help="… while progress < 0.67 "
                         "(Prophet: 5.0)", step=0.1, page=(0.0, 20.0), group="prophet"),
        "gap_late": Param(float, 2.5, 0.0, 100.0, label="gap bar, late phase", help="… after (Prophet: 2.5)",
                          step=0.1, page=(0.0, 20.0), group="prophet"),
        "gap_scale": Param(float, 1.0, 0.0, 10.0, label="gap scale (ours)", help="multiplies the three bars: one "
                           "dial for the Sweep (1 = the paper's)", step=0.05, page=(0.0, 4.0), group="prophet"),
        "prophet_window": Param(str, "block", choices=("block", "answer"), label="slots whose gap is watched",
                                help="block: the block's still-masked slots (Unmask's rule, for answers without a "
                                     "phrase); answer: the release's evaluation: \"The answer is\" written at "
                                     "answer_at, the gap of the answer_length slots after it", group="prophet"),
        "answer_at": Param(int, 200, 0, 1023, label="\"The answer is\" at", help="prophet_window=answer: the "
                           "phrase's first slot in the response (the release's eval.sh: 200 of 256)", step=1,
                           page=(0, 255), group="prophet"),
        "answer_length": Param(int, 5, 1, 64, label="answer window", help="prophet_window=answer: slots watched "
                               "after the phrase (the release: 5)", step=1, page=(1, 16), group="prophet"),
    },
    summary_type=ProphetSummary,
    reasons={"PROPHET_EXIT": ReasonEntry(13, "Prophet early commit", "#e7298a", "exit")},
    records={"draft": ProphetFields},
    views=(ViewEntry("prophet", "Prophet: the answer gap against its bar", "Prophet",
                     "explorer.views.rivals:prophet_gap", "explorer.views.rivals", "server"),),
    shows=(ProphetFields,),
    tab_note="Prophet commits the rest of the answer once the model's top-2 gap says it already knows it "
             "(Li et al.); the bar falls as the decode progresses.",
    glossary=(("Prophet gap", "top-1 minus top-2 logit, averaged over the block's masked slots (or, as the "
                              "release's evaluation, over the 5 slots after a written \"The answer is\"); once it "
                              "clears the phase's bar (7.5, 5.0, 2.5 as the decode progresses) the rest is "
                              "committed at once"),),
    example=Example(dict(block_size=8, temperature=1.0, gap_scale=1.5), "story"),
)
