"""Every decoder of the catalogue through every batch layout a GPU takes, on the CPU (issue 75): ragged (a CPU's
own), packed and padded (``UNMASK_LAYOUT``, an accelerator's), and the static path (``UNMASK_STATIC=on``, a CUDA
device's default), with 2 and 4 decodes of one decoder in one round (16 for the cached ones and a few others), and
rounds that mix every decoder, model and cache kind (none, the exact block cache, Fast-dLLM's prefix and dual caches,
Fast-dLLM v2's sub-blocks). Each decode runs through the real engine loop beside the others (the rounds are checked
to be shared and never to raise: a raising round is rerun request by request, which would hide a layout's bug) and
must write the tokens of its solo decode on today's path, its records' confidences within 1e-4. Tiny random
checkpoints and short generations: this runs on every CI."""

from __future__ import annotations

import numpy as np
import pytest

from engine.decoders import build_decoder, parse_spec
from engine.runtime.jobs import Scheduler
from engine.runtime.loop import Generation
from engine.runtime.resources import cached_loader
from engine.tasks import get_task

LAYOUTS = ("ragged", "packed", "padded", "static")
GEN = 12
# (model, spec): every decoder of engine/catalogue on the smallest model it applies to
SPECS = [("sdar", s) for s in (
    "ar:gen_length=8", "llada:block_size=4,steps=2", "threshold:tau=0.5,block_size=4", "eb:block_size=4",
    "s2d2:block_size=4,router=always", "tspd:block_size=4,controller=heuristic", "credit:block_size=4",
    "klass:block_size=4", "prophet:block_size=4", "edit:block_size=4,tau=0.5", "wino:block_size=4",
    "remdm:block_size=4,steps=2", "subblock:block_size=4,sub_block=2")] + [
    ("small", "simsd:block_size=4"), ("dream", "dream:gen_length=8,steps=4"), ("uniform", "uniform"),
    ("llada", "threshold:tau=0.9,block_size=8,kv_cache=dual"), ("llada", "llada:block_size=8,steps=4,kv_cache=prefix")]
# a round of 16: both kinds of model, every cache kind, greedy and seeded draws
MIXED = [("llada", s) for s in (
    "threshold:tau=0.9,block_size=8,kv_cache=dual", "threshold:tau=0.7,block_size=4,kv_cache=prefix",
    "threshold:tau=0.9,block_size=8", "llada:block_size=4,steps=2,kv_cache=dual,temperature=1",
    "klass:block_size=4,kv_cache=dual", "eb:block_size=8,kv_cache=prefix", "remdm:block_size=4,steps=2,kv_cache=dual",
    "prophet:block_size=4,kv_cache=prefix,temperature=1")] + [("sdar", s) for s in (
        "subblock:block_size=4,sub_block=2", "subblock:block_size=8,sub_block=4,temperature=1",
        "threshold:tau=0.5,block_size=4,use_cache=0", "s2d2:block_size=4,router=always,temperature=1",
        "ar", "tspd:block_size=4,controller=heuristic", "edit:block_size=4,tau=0.5,use_cache=0", "wino:block_size=4")]
# and a round of 16 of every other kind of model and the decoders the first runs on the other model only, so every
# decoder meets 15 others in a round (the prompts of "small" are four: its decodes come first)
REST = [("sdar", "credit:block_size=4"), ("small", "simsd:block_size=4"),
        ("small", "simsd:block_size=4,acceptance=mrs,temperature=1"), ("dream", "dream:gen_length=8,steps=4"),
        ("dream", "dream:gen_length=8,steps=4,temperature=1"), ("uniform", "uniform"), ("sdar", "ar:gen_length=8"),
        ("llada", "threshold:tau=0.9,block_size=8,kv_cache=dual"), ("llada", "llada:block_size=4,steps=2")] + [
    ("sdar", s) for s in ("klass:block_size=4,temperature=1", "remdm:block_size=4,steps=2,temperature=1,top_p=0.9",
                          "llada:block_size=4,steps=2", "eb:block_size=4", "prophet:block_size=4",
                          "subblock:block_size=4,sub_block=2", "credit:block_size=4")]
# the 16 decodes a round, of every decoder, and of the caches a layout must splice or grow per decode
# (Fast-dLLM's prefix cache besides the dual one above); the 16 solo decodes each cost most of it
SIXTEEN = list(dict.fromkeys(SPECS + [("llada", "llada:block_size=8,steps=4,kv_cache=prefix"),
                                      ("sdar", "tspd:block_size=4,controller=heuristic")]))
# (layout, decodes, model, spec). The uniform canvas's forwards are calls (``scheduler.Call``), which neither a
# layout nor the static path touches: one layout runs all there is of it
CASES = [(layout, n, m, s) for layout in LAYOUTS
         for n, m, s in [(n, m, s) for n in (2, 4) for m, s in SPECS] + [(16, m, s) for m, s in SIXTEEN]
         if m != "uniform" or layout == "ragged"]
FLOATS = ("confidence", "margin", "entropy")


@pytest.fixture(scope="module")
def models(adapter, tmp_path_factory):
    from engine.models.model import load_model
    from tests.families import write_llada, write_qwen2_family
    d = tmp_path_factory.mktemp("layouts")
    return dict(sdar=adapter, llada=load_model(str(write_llada(d / "llada")[0]), device="cpu"),
                dream=load_model(str(write_qwen2_family(d / "dream", "Dream")), device="cpu"),
                small=load_model("unmask-tasks-small", device="cpu"),
                uniform=load_model("unmask-uniform-small", device="cpu"))


PROMPTS = {"arith": [p.prompt for p in get_task("arith").problems("test", 16, seed=1)],
           "story": [p.prompt for p in get_task("story").problems("test", 16, seed=1)]}
LOAD = cached_loader("cpu")
_SOLO: dict = {}


def make(models, model: str, spec: str, i: int):
    """Decode ``i`` of a spec: its own prompt and seed."""
    name, params = parse_spec(spec)
    params = {"gen_length": GEN, "seed": i, **params}
    prompt = PROMPTS["story" if model == "small" else "arith"][i]
    return Generation(models[model], prompt, build_decoder(name, **params), load=LOAD)


def solo(models, model: str, spec: str, i: int, monkeypatch):
    """The decode alone on today's path (eager, batch 1), once per module."""
    if (model, spec, i) not in _SOLO:
        with monkeypatch.context() as mp:
            mp.setenv("UNMASK_STATIC", "off")
            mp.setenv("UNMASK_LAYOUT", "auto")
            _SOLO[model, spec, i] = make(models, model, spec, i).run()
    return _SOLO[model, spec, i]


@pytest.fixture
def seen(monkeypatch):
    """Forces the layout (``use``) and records every batched forward's (layout, size), every round's size and every
    round that raised."""
    from engine.models import ragged
    from engine.models.static import StaticPath
    from engine.runtime import batch, scheduler
    calls, sizes, raised = [], [], []

    def spy(name, fn):
        def run(*args):
            calls.append((name, len(args[-1])))
            return fn(*args)
        return run
    monkeypatch.setattr(ragged, "ragged_forward", spy("ragged", ragged.ragged_forward))
    monkeypatch.setattr(batch, "packed_forward", spy("packed", batch.packed_forward))
    monkeypatch.setattr(batch, "padded_forward", spy("padded", batch.padded_forward))
    monkeypatch.setattr(StaticPath, "run", spy("static", StaticPath.run))
    round_ = scheduler.run_round

    def run_round(reqs):
        sizes.append(len(reqs))
        try:
            return round_(reqs)
        except Exception as e:
            raised.append(repr(e))
            raise
    monkeypatch.setattr(scheduler, "run_round", run_round)

    def use(layout: str):
        monkeypatch.setenv("UNMASK_STATIC", "on" if layout == "static" else "off")
        monkeypatch.setenv("UNMASK_LAYOUT", "auto" if layout == "static" else layout)
        calls.clear(), sizes.clear()
    return use, (calls, sizes), raised


def together(models, decodes: list[tuple[str, str, int]]) -> list:
    """The decodes submitted together to the engine loop, all running at once; their traces in order."""
    jobs = [lambda d=d: make(models, *d).requests() for d in decodes]
    s = Scheduler(jobs, len(jobs))
    return [t for _, t in sorted((i, t) for i, t, _ in s.events())]


def same(a, b, what) -> None:
    assert a.meta.token_ids == b.meta.token_ids and a.nfe == b.nfe, what
    assert len(a.records) == len(b.records), what
    for r1, r2 in zip(a.records, b.records):
        assert r1.kind == r2.kind and (r1.tokens_after == r2.tokens_after).all(), what
        assert (r1.reason == r2.reason).all(), what
        for f in FLOATS:
            np.testing.assert_allclose(getattr(r1, f), getattr(r2, f), atol=1e-4, equal_nan=True, err_msg=str(what))


def check_shared(seen: tuple, layout: str, n: int, what) -> None:
    """Some round held all ``n`` decodes, and their forwards ran in the layout asked for (the static path sends
    what it does not take, a sub-block's dynamic cache, to auto's layout). The uniform canvas's forwards are
    calls, which run alone within their round."""
    calls, sizes = seen
    assert max(sizes) == n, (what, sizes)
    if "uniform" in str(what):
        return
    names = {name for name, _ in calls}
    assert names == {layout} if layout != "static" else "static" in names, (what, calls)


def test_the_specs_cover_every_decoder_of_the_catalogue():
    from engine.catalogue import catalogue
    assert {parse_spec(s)[0] for _, s in SPECS} == set(catalogue.DECODERS)
    assert {parse_spec(s)[0] for _, s in MIXED + REST} == set(catalogue.DECODERS)


@pytest.mark.parametrize("layout,n,model,spec", CASES, ids=[f"{lay}-{n}-{s}" for lay, n, _, s in CASES])
def test_n_decodes_of_every_decoder_in_every_layout_equal_their_solo_decodes(models, seen, monkeypatch, layout, n,
                                                                           model, spec):
    use, counted, raised = seen
    want = [solo(models, model, spec, i, monkeypatch) for i in range(n)]
    use(layout)
    got = together(models, [(model, spec, i) for i in range(n)])
    for i, (a, b) in enumerate(zip(want, got)):
        same(a, b, (layout, spec, n, i))
    assert raised == [], (layout, spec, n, raised)
    check_shared(counted, layout, n, (spec, n))


@pytest.mark.parametrize("mixed", [MIXED, REST], ids=["16", "rest"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_round_mixing_decoders_models_and_caches_equals_each_solo_decode(models, seen, monkeypatch, layout, mixed):
    use, counted, raised = seen
    decodes = [(m, s, i) for i, (m, s) in enumerate(mixed)]
    want = [solo(models, *d, monkeypatch) for d in decodes]
    use(layout)
    got = together(models, decodes)
    for d, a, b in zip(decodes, want, got):
        same(a, b, (layout, d))
    assert raised == [], (layout, raised)
    check_shared(counted, layout, len(decodes), layout)
