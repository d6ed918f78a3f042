"""KLASS's card (torch-free): its catalogue entry, parameters, commit reason, record fields, view and words."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.catalogue.cards import Card, Example, ReasonEntry, ViewEntry
from engine.catalogue.params import COMMON, Decoder, Param


@dataclass(frozen=True)
class KlassFields:
    kl: np.ndarray            # (L,) KL(p_now ‖ p_previous forward) in nats at each masked slot (NaN: no previous
    #                           forward scored it, or not masked)
    kl_stable: np.ndarray     # (L,) bool: the last `kl_history` KLs all below ε
    klass_ready: int          # slots stable and confident this forward (0: the step's quota was committed)
    kl_eps: float             # ε in force


CARD = Card(
    decoder=Decoder(
        "klass", "**KLASS** KL-adaptive stability sampling: commit every masked slot whose distribution has stopped "
        "moving (KL between consecutive forwards below ε for the last H forwards) and whose confidence is above "
        "τ; when none is, LLaDA's quota of the most confident. On a full-attention model (LLaDA, Dream) every "
        "forward scores the whole canvas, so a slot's KL history runs across blocks, as the reference keeps it; a "
        "block-causal model first scores a slot in its own block's first forward. As released (klass_as=release), "
        "by family: LLaDA's decode at T > 0 reads KL and confidence from the softmax of its Gumbel-perturbed "
        "values (near one-hot: a slot is stable when the same token is drawn in consecutive forwards); Dream's "
        "reads the untempered softmax, writes its argmax, and with no ready slot commits exactly one token. "
        "klass_as=unmask keeps Unmask's earlier choice (p untempered, the decode's candidate, LLaDA's quota). "
        "Where we chose: a block runs until it is full.",
        COMMON + ("steps", "tau", "kl_eps", "kl_history", "klass_pick", "klass_as"),
        overrides={"tau": dict(default=0.9, help="confidence a stable slot must exceed (KLASS: 0.9; its LLaDA "
                                                 "GSM8K script 0.6)")},
        knob="kl_eps", title="KLASS: stable and confident"),
    rank=2,
    menu=("Trajectory", "KLASS: commit what has stopped moving"),
    params={
        "kl_eps": Param(float, 0.01, 0.0, 10.0, open_lo=True, label="ε (KL threshold, nats)",
                        help="a slot is stable when its last H KLs are all below ε (KLASS: 0.01; LLaDA GSM8K 0.015)",
                        step=0.001, page=(0.0005, 1.0), group="klass"),
        "kl_history": Param(int, 2, 1, 16, label="H (KL history)", help="consecutive forwards the KL must stay "
                            "below ε", step=1, page=(1, 8), group="klass"),
        "klass_pick": Param(str, "all", choices=("all", "max_conf", "min_kl", "random"), label="which ready slots",
                            help="all of them (KLASS's default), or one: the most confident, the lowest KL, or one "
                                 "at random", group="klass"),
        "klass_as": Param(str, "release", choices=("release", "unmask"), label="KLASS statistics",
                          help="release: as the released code for the model's family (LLaDA: at T > 0, KL and "
                               "confidence from the Gumbel-perturbed softmax; Dream: untempered p, argmax token, "
                               "one token when none is ready); unmask: p untempered and the decode's own candidate "
                               "on every model, LLaDA's quota (Unmask's earlier choice: the KL then measures the "
                               "model's distribution, not two samples)", group="klass"),
    },
    reasons={"KL_STABLE": ReasonEntry(14, "KLASS stable + confident", "#1b9e77", "kl")},
    records={"draft": KlassFields},
    views=(ViewEntry("klass", "KLASS: each slot's KL against ε", "KLASS",
                     "explorer.views.rivals:klass_map", "explorer.views.rivals"),),
    shows=(KlassFields,),
    tab_note="KLASS commits a slot once its distribution has stopped moving between forwards and it is confident.",
    glossary=(("KL stability (KLASS)", "KL(p_t ‖ p_t−1) between a slot's distributions in consecutive forwards; a "
                                       "slot whose last H KLs are below ε and whose confidence is above τ is "
                                       "committed"),),
    example=Example(dict(block_size=8, temperature=1.0), "story"),
)
