"""The entropy-bounded sampler, EB (Ben-Hamu et al., NeurIPS; DiffusionGemma's ``EntropyBoundSampler``).

Each forward sorts the block's masked slots by entropy, lowest first, and commits the longest prefix whose
Σ entropy − max entropy ≤ γ (``entropy_bound``): the left side bounds the mutual information between the tokens
committed together, so they are nearly independent. The first slot always qualifies. Entropies are in nats, of the
model's untempered distribution at each slot (transformers' ``accept_canvas`` takes ``Categorical(logits).entropy()``
of the logits it is given).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from engine.catalogue.catalogue import config_class
from engine.runtime.loop import BlockContext, Policy
from engine.records.trace import Reason
from engine.decoders.eb.card import EBFields


def entropy_bound_prefix(entropy: torch.Tensor, masked: torch.Tensor, gamma: float):
    """(chosen indices, rank of each masked slot (-1 elsewhere), the bound's left side at each rank)."""
    idx = masked.nonzero()[:, 0]
    order = idx[torch.argsort(entropy[idx], stable=True)]                    # lowest entropy first
    h = entropy[order].double()
    bound = torch.cumsum(h, 0) - h                                           # sorted: h is the running maximum
    chosen = order[bound <= gamma]
    rank = torch.full((len(entropy),), -1, dtype=torch.long)
    rank[order] = torch.arange(len(order))
    lhs = torch.full((len(entropy),), float("nan"), dtype=torch.float64)
    lhs[: len(order)] = bound
    return chosen.sort().values, rank, lhs


class EBPolicy(Policy):
    name = "eb"
    config_cls = config_class("eb")

    def run_block(self, ctx: BlockContext):
        gamma = self.cfg.entropy_bound
        while ctx.masked.any():
            _, st = yield from ctx.draft()
            nats = st.entropy.double() * math.log(st.probs.shape[-1])          # back from normalised to nats
            masked = ctx.masked.clone()
            chosen, rank, lhs = entropy_bound_prefix(nats, masked, gamma)
            ctx.commit(chosen, st.candidate[chosen], Reason.ENTROPY_BOUND)
            yield ctx.emit("draft", st, EBFields(
                entropy_nats=np.where(masked.numpy(), nats.numpy(), np.nan).astype(np.float32),
                eb_order=rank.numpy().astype(np.int32), eb_bound=lhs.numpy().astype(np.float32), gamma=float(gamma)))
