"""Which decoders apply to which models: each decoder's catalogue ``needs`` against what the model offers
(``ModelAdapter.offers``)."""

from __future__ import annotations

from engine.catalogue import catalogue
from engine.errors import ConfigError

# each need a decoder may have, and the refusal when a model lacks it ({d}: the decoder, {m}: the model)
REFUSALS = {
    "mask_slots": "{d} fills [MASK] slots; {m} denoises a canvas of random tokens: use the uniform decoder",
    "canvas": "{d} denoises a uniform-noise canvas; {m} is a masked-diffusion model",
    "block_causal": "{d} needs a block-causal model; {m} attends bidirectionally over the whole canvas",
    "full": "{d} decodes the whole answer as one block of a full-attention model (Dream, LLaDA); {m} is not one",
    "no_shift": "{d} needs a position-aligned model; {m} predicts each token from the position before it",
}


def needs_of(decoder: str) -> tuple[str, ...]:
    """A decoder's catalogue ``needs``, with the one every decoder that does not denoise a canvas has: [MASK]
    slots to fill."""
    needs = tuple(catalogue.decoder(decoder).needs)
    return needs if "canvas" in needs else ("mask_slots",) + needs


def why_not(decoder: str, adapter) -> str | None:
    """Why a decoder does not apply to a model (``needs_of``), or None if it does."""
    offered = adapter.offers()
    for need in needs_of(decoder):
        if need not in offered:
            return REFUSALS[need].format(d=decoder, m=f"{adapter.name} ({adapter.model_type})")
    return None


def check_applies(decoder: str, adapter) -> None:
    """Refuse, with the reason, a decoder whose needs the model does not meet."""
    reason = why_not(decoder, adapter)
    if reason:
        raise ConfigError(reason)
