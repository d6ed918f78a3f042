"""Property-based fuzzing of everything a visitor controls: catalogue parameters, SPEC strings, URL query dicts and
prompts (unicode, surrogates, NUL, huge numbers, NaN/inf). Every input either decodes or raises the user-facing
error (``UserError``); never anything else, never a hang (bounded examples, a deadline, a short generation)."""

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.catalogue import catalogue
from engine.decoders import build_decoder
from engine.errors import UserError
from engine.harness.service import DecodeService
from engine.catalogue.spec import parse_spec
from explorer.state import parse_query

FUZZ = settings(max_examples=60, deadline=2000, suppress_health_check=[HealthCheck.function_scoped_fixture],
                derandomize=True)
NASTY_TEXT = st.one_of(st.text(max_size=30), st.sampled_from(["nan", "inf", "-inf", "1e400", "-1e400", "\ud800",
                                                                "\x00", "9" * 40, "0x10", "1_000", " 3 ", "", "∞"]))
NUMBERS = st.one_of(st.integers(min_value=-2**70, max_value=2**70),
                    st.floats(allow_nan=True, allow_infinity=True), st.booleans())
VALUES = st.one_of(NASTY_TEXT, NUMBERS, st.none())


@pytest.fixture(scope="module")
def service(sdar_dir):
    return DecodeService(default_model=str(sdar_dir), max_seconds=5)


@FUZZ
@given(decoder=st.sampled_from(list(catalogue.DECODERS) + ["nope", ""]),
       params=st.dictionaries(st.sampled_from(list(catalogue.PARAMS) + ["bogus"]), VALUES, max_size=4))
def test_parameters_build_or_user_error(decoder, params):
    try:
        policy = build_decoder(decoder, **params)
    except UserError as e:
        assert "\n" not in str(e)
        return
    for k, v in policy.cfg.params().items():
        if isinstance(v, float):
            assert math.isfinite(v), k


@FUZZ
@given(spec=st.one_of(st.text(max_size=60), st.builds(
    lambda d, kv: d + ":" + ",".join(f"{k}={v}" for k, v in kv), st.sampled_from(list(catalogue.DECODERS)),
    st.lists(st.tuples(st.sampled_from(list(catalogue.PARAMS)), NASTY_TEXT), max_size=4))))
def test_spec_strings_build_or_user_error(spec):
    try:
        name, params = parse_spec(spec)
        build_decoder(name, page=True, **params)
    except UserError as e:
        assert "\n" not in str(e)


@FUZZ
@given(query=st.dictionaries(st.one_of(st.sampled_from(list(catalogue.PARAMS) + ["decoder", "prompt", "step",
                                                                                "model", "block"]), st.text(max_size=8)),
                             NASTY_TEXT, max_size=6))
def test_url_queries_never_fail(query):
    values, problems = parse_query(query, models=("m",))
    for k, v in values.items():
        if k in catalogue.PARAMS:
            catalogue.PARAMS[k].check(v, page=bool(catalogue.PARAMS[k].page))   # clamped into the page range
    assert all(isinstance(p, str) for p in problems)


@settings(max_examples=25, deadline=10000, suppress_health_check=[HealthCheck.function_scoped_fixture],
          derandomize=True)
@given(prompt=st.one_of(st.text(max_size=80), NASTY_TEXT, st.just("x" * 2001), st.just("a\ud800b")),
       decoder=st.sampled_from(["threshold", "s2d2", "llada", "tspd"]),
       temperature=st.sampled_from([0.0, 1.0, "nan"]), seed=st.sampled_from([0, 2**31 - 1, 2**63, -1, "1e400"]))
def test_prompts_decode_or_user_error(service, prompt, decoder, temperature, seed):
    params = dict(gen_length=8, block_size=4, temperature=temperature, seed=seed)
    if decoder == "tspd":
        params["controller"] = "heuristic"
    try:
        trace = service.run(prompt, decoder, params, page=True)
    except UserError as e:
        assert "\n" not in str(e)
        return
    assert trace.meta.generated_tokens <= 8
