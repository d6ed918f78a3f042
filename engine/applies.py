"""Which decoders apply to which models: each decoder's catalogue ``needs`` against what the model offers."""

from __future__ import annotations

from engine import catalogue
from engine.errors import ConfigError


def why_not(decoder: str, adapter) -> str | None:
    """Why a decoder does not apply to a model (its catalogue ``needs``), or None if it does."""
    needs = catalogue.decoder(decoder).needs
    if adapter.attention == "canvas" and "canvas" not in needs:
        return (f"{decoder} fills [MASK] slots; {adapter.name} ({adapter.model_type}) denoises a canvas of random "
                "tokens: use the uniform decoder")
    for need in needs:
        if need == "canvas" and adapter.attention != "canvas":
            return (f"{decoder} denoises a uniform-noise canvas; {adapter.name} ({adapter.model_type}) is a "
                    "masked-diffusion model")
        if need == "block_causal" and adapter.attention != "block_causal":
            return (f"{decoder} needs a block-causal model; {adapter.name} ({adapter.model_type}) attends "
                    "bidirectionally over the whole canvas")
        if need == "full" and adapter.attention != "full":
            return (f"{decoder} decodes the whole answer as one block of a full-attention model (Dream, LLaDA); "
                    f"{adapter.name} ({adapter.model_type}) is not one")
        if need == "no_shift" and adapter.logit_shift:
            return (f"{decoder} needs a position-aligned model; {adapter.name} ({adapter.model_type}) predicts "
                    "each token from the position before it")
    return None


def check_applies(decoder: str, adapter) -> None:
    """Refuse, with the reason, a decoder whose needs the model does not meet."""
    reason = why_not(decoder, adapter)
    if reason:
        raise ConfigError(reason)
