"""The parameter catalogue is the one source: the engine's configs, the CLI, SPEC strings, the URL and the page's
controls all know every parameter, with the same name, type, default and range."""

import math
from urllib.parse import parse_qsl

import gradio as gr
import pytest

from engine.catalogue import catalogue
from engine.__main__ import build_parser
from engine.decoders import DECODERS, build_decoder
from engine.errors import ConfigError
from engine.catalogue.spec import parse_spec
from explorer.page.controls import build_controls, decoder_params
from explorer.page.context import Page
from explorer.state import parse_query, to_query

PAIRS = [(d, k) for d in catalogue.DECODERS for k in catalogue.params_of(d)]


def sample_value(p):
    """A valid non-default value of a parameter (or the only value it has)."""
    if p.type is bool:
        return not p.default
    if p.choices:
        return next((c for c in p.choices if c != p.default and c), p.default)
    if p.type is str:
        return "unmask-arith-tiny"
    lo, hi = p.page or (p.lo, p.hi)
    v = p.clamp((lo + hi) / 2 if p.type is float else (lo + hi) // 2)
    return v


def test_configs_are_made_from_the_catalogue():
    for name, cls in DECODERS.items():
        cfg = cls.config_cls()
        assert list(cfg.params()) == list(catalogue.params_of(name)), name
        assert all(getattr(cfg, k) == p.default for k, p in catalogue.params_of(name).items())


@pytest.mark.parametrize("decoder,key", PAIRS)
def test_every_parameter_reaches_engine_cli_spec_url(decoder, key):
    p = catalogue.params_of(decoder)[key]
    value = sample_value(p)
    if key == "tau_off":                      # the cross-field rules: tau_on > tau_off,
        value = min(value, 0.0)
    if key == "sub_block":                    # block_size (8) a multiple of sub_block
        value = 4
    # engine, through a SPEC string
    name, raw = parse_spec(f"{decoder}:{key}={int(value) if isinstance(value, bool) else value}")
    assert getattr(build_decoder(name, **raw).cfg, key) == value
    # CLI: one flag per parameter, parsed to the same value
    flag = "--" + (p.cli or key.replace("_", "-"))
    argv = ["generate", "--prompt", "x", "--decoder", decoder]
    argv += ([flag] if value is True else [flag.replace("--", "--no-", 1)] if value is False else [flag, str(value)])
    args = build_parser().parse_args(argv)
    assert p.coerce(getattr(args, key)) == value
    # URL: the same key round-trips
    back, problems = parse_query(dict(parse_qsl(to_query({key: value}))))
    assert back == {key: value} and not problems


def test_every_parameter_is_a_page_control():
    page = Page(service=None, examples={}, models=("m",))
    with gr.Blocks():
        c = build_controls(page)
    assert set(c.keys) == set(catalogue.PARAMS)
    assert all(comp.elem_id == key for key, comp in c.values.items())
    for key, comp in c.values.items():
        p = catalogue.PARAMS[key]
        if isinstance(comp, gr.Slider):
            lo, hi = p.page or (p.lo, p.hi)
            assert lo <= comp.minimum <= comp.maximum <= hi and comp.value == p.default, key
    # the page's values map onto each decoder's parameters, clamped to that decoder's range
    values = {k: comp.value for k, comp in c.values.items()}
    assert decoder_params("tspd", dict(values, tau=1.0))["tau"] < 1.0
    assert decoder_params("ar", values)["block_size"] == 1


@pytest.mark.parametrize("key", [k for k, p in catalogue.PARAMS.items() if p.lo is not None
                                 and p.type in (int, float)])
def test_bad_values_are_one_line_config_errors(key):
    decoder = next(d for d in catalogue.DECODERS if key in catalogue.params_of(d) and d != "ar")
    p = catalogue.params_of(decoder)[key]
    bad = ["nan", "inf", "-inf", "1e400", "abc", "", str(p.hi + 1), str(p.lo - 1), "1" * 30]
    if p.type is int:
        bad.append("3.7")
    for raw in bad:
        with pytest.raises(ConfigError) as e:
            build_decoder(decoder, **{key: raw})
        assert "\n" not in str(e.value) and key in str(e.value), (key, raw)


def test_page_limits_are_stricter_for_page_specs():
    build_decoder("threshold", gen_length=1024)                    # the engine and CLI take the full range
    with pytest.raises(ConfigError, match="on this page"):
        build_decoder("threshold", page=True, gen_length=1024)     # a SPEC typed in the page does not
    assert math.isclose(build_decoder("threshold", page=True, tau="0.5").cfg.tau, 0.5)


def test_presets_and_names_are_defined_once():
    from engine.decoders.s2d2 import card
    from engine.decoders.s2d2.estimators import ESTIMATORS
    from engine.decoders.s2d2.routers import ROUTERS, make_router
    assert ROUTERS is card.ROUTERS and ESTIMATORS is card.ESTIMATORS
    for r in ROUTERS:
        make_router(build_decoder("s2d2", router=r).cfg)
    for name, preset in card.S2D2_PRESETS.items():
        cfg = build_decoder("s2d2", preset=name).cfg
        assert all(getattr(cfg, k) == v for k, v in preset.items())
        assert build_decoder("s2d2", preset=name, block_size=8).cfg.block_size == 8   # explicit wins
    assert set(catalogue.params_of("s2d2")["preset"].choices) == {""} | set(card.S2D2_PRESETS)


def test_numbers_take_ascii_digits_only():
    from engine.catalogue.catalogue import PARAMS
    from engine.errors import ConfigError
    for raw in ("٠.٩", "९", "0x1", "1_0"):
        with pytest.raises(ConfigError):
            PARAMS["tau"].coerce(raw)
    for raw in ("٨", "8.0", "８"):
        with pytest.raises(ConfigError):
            PARAMS["block_size"].coerce(raw)
    assert PARAMS["tau"].coerce(" 0.9 ") == 0.9 and PARAMS["tau"].coerce("1e-3") == 0.001
    assert PARAMS["block_size"].coerce("+8") == 8


def test_a_config_has_no_silent_fallback():
    """A common parameter the decoder does not take is a declared field at its default (not one of its params);
    any other name is an error, not a default."""
    cfg = build_decoder("uniform").cfg
    assert cfg.temperature == 0.0 and cfg.use_cache is True and "temperature" not in cfg.params()
    with pytest.raises(AttributeError):
        cfg.tau
    with pytest.raises(ConfigError):
        build_decoder("uniform", temperature=1.0)
    assert set(build_decoder("threshold").cfg.params()) == set(catalogue.params_of("threshold"))


def test_settle_takes_only_declared_parameters():
    """What a model decides (a canvas length, generation defaults) may set the decoder's own parameters and the
    common ones; any other name is the caller's bug, refused (before, any attribute was set)."""
    from engine.decoders import build_decoder
    from engine.catalogue.catalogue import settle
    cfg = build_decoder("dream", gen_length=16).cfg
    assert settle(cfg, "test", block_size=16).block_size == 16
    with pytest.raises(KeyError, match="not parameters of dream"):
        settle(cfg, "test", tau_wide=0.3)
    with pytest.raises(KeyError, match="not parameters"):
        settle(cfg, "test", anything=1)
