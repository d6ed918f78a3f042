"""What a decoder needs besides its target model (its catalogue entry's ``resources``), resolved by whoever owns
the models and handed to the policy: the service from its model cache, the bench from its run's, the CLI and tests
by loading. A decoder never loads a model itself."""

from __future__ import annotations

from collections.abc import Callable

from engine.catalogue import catalogue
from engine.errors import ConfigError


def drafter(target, cfg, load: Callable[[str], object]):
    """SimSD's drafter: ``cfg.drafter``, else the target's pairing (config ``unmask.drafter``). Its vocabulary must
    extend the target's (same ids for the target's tokens) and it must be block-causal and position-aligned."""
    name = cfg.drafter or (target.info or {}).get("drafter")
    if not name:
        raise ConfigError(f"{target.name} has no paired drafter; give drafter=NAME")
    d = load(name)
    tv, dv = target.tokenizer.get_vocab(), d.tokenizer.get_vocab()
    if any(dv.get(w) != i for w, i in tv.items()) or d.mask_token_id != target.mask_token_id:
        raise ConfigError(f"drafter {d.name} does not share {target.name}'s token ids")
    if not {"block_causal", "no_shift"} <= d.offers():
        raise ConfigError(f"drafter {d.name} must be a block-causal, position-aligned model")
    return d


RESOLVERS = {"drafter": drafter}


def resolve(policy, target, load: Callable[[str], object] | None = None) -> dict:
    """The policy's resources for this target; ``load(name)`` gives a model by name (default: load it)."""
    if load is None:
        from engine.models.model import load_model
        load = lambda name: load_model(name, device=str(target.device))  # noqa: E731
    return {r: RESOLVERS[r](target, policy.cfg, load) for r in catalogue.decoder(policy.name).resources}


def cached_loader(device) -> Callable[[str], object]:
    """A loader that loads each model once for as long as it is kept (a bench run's)."""
    from engine.models.model import load_model
    models: dict = {}
    return lambda name: models[name] if name in models else models.setdefault(name, load_model(name, device=str(device)))
