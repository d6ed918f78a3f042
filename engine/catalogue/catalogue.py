"""The parameter catalogue: every decoder, every parameter, every limit, written once (torch-free).

For each parameter: its name (the same in the engine, CLI, SPEC strings, URL and page), type, default, range,
label and one-line help. The decoders' config dataclasses, engine validation, CLI flags, SPEC parsing, URL parsing
and the page's controls are all derived from ``PARAMS`` and ``DECODERS``. A decoder in its own folder brings its
entries on its card (``engine.catalogue.cards``); the others are written here. ``page`` narrows a range on the
public page.
"""
from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

from engine.catalogue.cards import cards
from engine.errors import ConfigError, listed
from engine.catalogue.params import COMMON, Decoder, Param  # noqa: F401  (re-exported: catalogue.COMMON, ...)

DEFAULT_DECODER = "threshold"  # the decoder a page, a CLI call or a SPEC without a name gets
BASELINE_DECODER = "ar"        # the quality bar every bench and sweep decodes beside the settings
MAX_PROMPT_CHARS = 2000        # characters of prompt text, everywhere (page, URL, API, CLI)
SEED_MAX = 2**31 - 1

P = Param
PARAMS: dict[str, Param] = {
    # every decoder
    "block_size": P(int, 8, 1, 64, label="Block size B", help="positions decoded in parallel per block", step=1,
                    page=(1, 32), group="main"),
    "gen_length": P(int, 64, 1, 1024, label="Generation length", help="masked slots after the prompt", step=8,
                    page=(8, 256), group="main"),
    "temperature": P(float, 0.0, 0.0, 5.0, label="Temperature (0 = greedy)", help="sampling temperature",
                     step=0.05, page=(0.0, 2.0), group="sampling"),
    "top_k": P(int, 0, 0, 1000, label="top-k (0 = off)", help="sample among the k most likely tokens", step=1,
               page=(0, 50), group="sampling"),
    "top_p": P(float, 1.0, 0.0, 1.0, open_lo=True, label="top-p", help="nucleus sampling mass", step=0.01,
               group="sampling"),
    "seed": P(int, 0, 0, SEED_MAX, label="Seed", help="fixes every random choice of a decode", group="sampling"),
    "use_cache": P(bool, True, label="exact block KV cache", help="off: recompute the prefix every forward",
                   group="engine", cli="cache"),
    "kv_cache": P(str, "none", choices=("none", "prefix", "dual"), label="KV cache of full-attention models",
                  help="none: the whole canvas every forward; Fast-dLLM's approximate caches, from each block's "
                  "first forward: prefix (later forwards run the block and the rest), dual (only the block); "
                  "block-causal models keep their exact cache", group="engine", cli="kv-cache"),
    "measure_drift": P(bool, False, label="measure the cache's drift",
                       help="one uncached forward beside each cached one: max |Δ logit| (not counted in NFE)",
                       group="engine"),
    "stop_at_eos": P(bool, True, label="stop at [EOS]", help="stop once a stop token is decoded", group="engine",
                     cli="eos-stop"),
    "fuse_commit": P(bool, True, label="fuse commit into the next forward",
                     help="off: SDAR's separate forward to store a finished block's K/V", group="engine"),
    # shared by several decoders
    "tau": P(float, 0.9, 0.0, 1.0, open_lo=True, label="τ (threshold)", help="confidence a token must reach",
             step=0.01, page=(0.05, 1.0), group="main"),
    "steps": P(int, 0, 0, 1024, label="Steps per block (0 = B)", help="denoising forwards per block (quota schedule)",
               step=1, page=(0, 64), group="main"),
    # S2D2 and SimSD (each its own choices)
    "acceptance": P(str, "stochastic", choices=("stochastic", "greedy"), label="Acceptance",
                    help="stochastic: min(1, (q/p)^γ) + residual; greedy: argmax match", group="s2d2"),
    # EB and the uniform canvas
    "entropy_bound": P(float, 0.1, 0.0, 100.0, open_lo=True, label="γ (entropy bound)", help="commit the lowest-"
                       "entropy slots while Σ H − max H ≤ γ (nats)", step=0.01, page=(0.01, 5.0), group="eb"),
}
for _k, _p in PARAMS.items():
    object.__setattr__(_p, "name", _k)


DECODERS: dict[str, Decoder] = {}   # every decoder, from its folder's card (engine.catalogue.cards), in menu order
# the decoder menu in plain words, grouped (the page's dropdown lists them in this order)
MENU_GROUPS = ("Baseline", "Speculative", "Trajectory", "Changes its mind", "Family's own sampler")
MENU: dict[str, tuple[str, str]] = {}


def _index_cards() -> None:
    """Every decoder lives in its own folder and brings its entry, parameters and menu words on its card
    (engine.catalogue.cards); the menu lists the groups in MENU_GROUPS order, each by its cards' ranks."""
    found = cards()
    order = sorted(found, key=lambda n: (MENU_GROUPS.index(found[n].menu[0]), found[n].rank, n))
    for name in order:
        card = found[name]
        assert not set(card.params) & set(PARAMS), f"{name}: a parameter name is taken"
        for k, p in card.params.items():
            object.__setattr__(p, "name", k)
        PARAMS.update(card.params)
        DECODERS[name] = card.decoder
        MENU[name] = card.menu


_index_cards()



def menu_label(name: str) -> str:
    group, words = MENU[name]
    return f"{group} · {words}"


def embedded_names() -> list[str]:
    """The models shipped under assets/models (the only drafters a visitor may name)."""
    root = Path(__file__).resolve().parents[2] / "assets" / "models"
    return sorted(p.parent.name for p in root.glob("*/config.json"))


def decoder(name: str) -> Decoder:
    if not isinstance(name, str) or name not in DECODERS:
        raise ConfigError(f"unknown decoder {str(name)[:40]!r}; known: {', '.join(sorted(DECODERS))}")
    return DECODERS[name]


def params_of(name: str) -> dict[str, Param]:
    """The decoder's parameters, with its overrides applied, in catalogue order."""
    d = decoder(name)
    return {k: dataclasses.replace(PARAMS[k], **d.overrides.get(k, {})) for k in d.params}


def shared_param(key: str) -> Param:
    """A parameter as the page and the URL see it (one control for every decoder): its choices are the union of
    every decoder's (S2D2 accepts stochastic|greedy, SimSD greedy|mrs)."""
    p = PARAMS[key]
    extra = [c for d in DECODERS.values() for c in d.overrides.get(key, {}).get("choices", ())]
    return dataclasses.replace(p, choices=tuple(dict.fromkeys(p.choices + tuple(extra)))) if p.choices else p


def validate(name: str, values: dict, page: bool = False) -> dict:
    """Raw values (text or Python) -> typed, range-checked values; unknown keys and bad values raise ConfigError.
    A preset supplies defaults that explicit values override."""
    spec = params_of(name)
    unknown = sorted(set(values) - set(spec))
    if unknown:
        raise ConfigError(f"unknown parameter(s) for {name}: {listed(unknown)}; "
                          f"known: {', '.join(spec)}")
    typed = {k: spec[k].coerce(v) for k, v in values.items() if v is not None}
    for k, v in typed.items():
        if page and spec[k].model and v and v not in embedded_names():
            raise ConfigError(f"{k}: on this page only the embedded models can be named")
    preset = typed.get("preset")
    if preset:
        spec["preset"].check(preset)
        typed = {**decoder(name).presets[preset], **typed}
    full = {k: typed.get(k, p.default) for k, p in spec.items()}
    for k, v in full.items():
        spec[k].check(v, page=page and k in typed)
    check_rules(name, full)
    return typed


def check_rules(name: str, values: dict) -> None:
    """The decoder's rules across parameters (t_max > t_min, ...) on a full set of its values."""
    for ok, msg in decoder(name).rules:
        if not ok(values):
            raise ConfigError(msg)


class ConfigBase:
    """What every generated config dataclass has: ``params()``. Values are validated once, by ``validate`` in
    ``engine.decoders.build_decoder``, before a config is made. A common parameter the decoder does not take (the
    uniform decoder has no temperature and no block cache) is a field fixed at its catalogue default, not set by
    anyone but the decoder's own ``settle`` (``settle`` below); any other name is an AttributeError."""
    decoder_name = ""

    def params(self) -> dict:
        """The parameters the decoder takes, as the catalogue names them."""
        return {k: getattr(self, k) for k in decoder(self.decoder_name).params}     # params_of's keys, in order


def config_class(name: str) -> type:
    """The decoder's config dataclass, made from its catalogue entries (``cfg.tau``, ``cfg.block_size``, ...)."""
    fields = [(k, p.type, dataclasses.field(default=p.default)) for k, p in params_of(name).items()]
    fields += [(k, PARAMS[k].type, dataclasses.field(default=PARAMS[k].default, init=False))
               for k in COMMON if k not in params_of(name)]
    cls = dataclasses.make_dataclass(f"{name.capitalize()}Config", fields, bases=(ConfigBase,))
    cls.decoder_name = name
    # its fields, declared where a reader looks (help(cfg), an IDE's hover): name, type, default, range, meaning
    cls.__doc__ = f"{name}'s parameters, made from engine.catalogue.catalogue:\n" + "\n".join(
        f"    {k}: {p.type.__name__} = {p.default!r}  {p.interval() if p.lo is not None and p.type is not bool else ''}"
        f"  {p.label} — {p.help}" for k, p in params_of(name).items())
    return cls


def settle(cfg, source: str, **values):
    """A copy of a validated config with the values a model decides (a canvas length, a checkpoint's generation
    defaults). A value of a parameter the decoder takes is checked as a visitor's would be (its range, the
    decoder's rules), and a bad one is the model's error (``source`` names where it came from); a common parameter
    the decoder does not take (its block size) is the decoder's to set. The original config is left as it was."""
    spec, out = params_of(cfg.decoder_name), copy.copy(cfg)
    undeclared = set(values) - set(spec) - set(COMMON)
    if undeclared:            # a bug of the caller, not a model's or a visitor's error
        raise KeyError(f"settle: {sorted(undeclared)} are not parameters of {cfg.decoder_name}")
    try:
        for k, v in values.items():
            if k in spec:
                v = spec[k].coerce(v)
                spec[k].check(v)
            setattr(out, k, v)
        check_rules(cfg.decoder_name, out.params())
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None
    return out
