"""The compiled forward (engine/models/compiled.py, ``UNMASK_COMPILE``): where it is checked exact (fp32 on a CPU),
compiled decodes equal eager ones (tokens, records within 1e-4) and rounds do not recompile (dynamo's graphs,
counted); where the compiler is missing or fails, the model decodes eagerly with one log line naming why. One real
compile (a one-layer model, one bucket) is shared by the file; the failures need none."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from engine.decoders import build_decoder, parse_spec
from engine.models import compiled
from engine.models.model import load_model
from engine.runtime.loop import Generation

SPEC = "threshold:tau=0.9,block_size=4,gen_length=12"     # cached block forwards: one bucket (1, 16, S=256)
PROMPT = "Q : 3 + 4 = ? A :"


def decode(adapter, spec: str = SPEC):
    name, params = parse_spec(spec)
    return Generation(adapter, PROMPT, build_decoder(name, **params)).run()


def eager_decode(adapter, monkeypatch):
    with monkeypatch.context() as mp:
        mp.setenv("UNMASK_COMPILE", "off")
        mp.setenv("UNMASK_STATIC", "off")
        return decode(adapter)


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """A one-layer model whose one bucket compiled in the background (its first decode eager meanwhile)."""
    from tests.conftest import write_sdar_checkpoint
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("UNMASK_COMPILE", "on")
        a = load_model(str(write_sdar_checkpoint(tmp_path_factory.mktemp("one"), layers=1, hidden=32)), device="cpu")
        first = decode(a)
        assert compiled.Compiled.of(a).wait(600)
        yield a, first


def test_auto_compiles_only_where_measured_exact_and_faster(monkeypatch):
    def model(device="cpu", dtype=torch.float32, family="sdar"):
        return SimpleNamespace(device=device, dtype=dtype, model_type=family, ragged=True)
    monkeypatch.setenv("UNMASK_COMPILE", "auto")
    monkeypatch.setenv("UNMASK_STATIC", "auto")
    assert all("exact compiled but not faster" in compiled.decide(model(family=f))[1]       # today: eager
               for f in compiled.EXACT[("cpu", torch.float32)])
    monkeypatch.setattr(compiled, "AUTO", {("cpu", torch.float32): frozenset({"sdar"})})
    assert compiled.decide(model())[0] and not compiled.decide(model(dtype=torch.bfloat16))[0]
    assert not compiled.decide(model(device="cuda"))[0]
    assert "not checked exact" in compiled.decide(model(family="llada"))[1]
    monkeypatch.setenv("UNMASK_COMPILE", "on")
    assert compiled.decide(model(device="cuda", dtype=torch.bfloat16, family="llada"))[0]
    monkeypatch.setenv("UNMASK_STATIC", "off")                 # it compiles the static path's buckets
    assert compiled.decide(model()) == (False, "UNMASK_STATIC=off (compilation runs on the static path's buckets)")
    monkeypatch.setenv("UNMASK_COMPILE", "off")
    assert not compiled.decide(model())[0]


def test_compiled_decodes_equal_eager_and_rounds_do_not_recompile(warm, monkeypatch):
    a, first = warm
    monkeypatch.setenv("UNMASK_COMPILE", "on")
    assert first.meta.compiled == "eager" and "compiled" not in first.meta.forward_path     # served while compiling
    before = compiled.graphs()
    got = decode(a)
    assert got.meta.forward_path == {"compiled": got.nfe} and got.nfe > 3 and got.meta.compiled == "compiled"
    assert compiled.graphs() == before                         # every round met the compiled bucket
    comp = compiled.Compiled.of(a)
    monkeypatch.setattr(comp, "run_only", comp.fn)            # a call no compiled code serves would raise here
    with torch.compiler.set_stance("fail_on_recompile"):
        assert decode(a).meta.forward_path == {"compiled": got.nfe}
    base = eager_decode(a, monkeypatch)
    assert got.meta.token_ids == base.meta.token_ids and got.nfe == base.nfe
    for x, y in zip(got.records, base.records, strict=True):
        np.testing.assert_allclose(np.nan_to_num(x.confidence), np.nan_to_num(y.confidence), atol=1e-4)


def test_a_second_model_of_the_same_shapes_runs_compiled(warm, monkeypatch):
    """Its bucket's compile converts no frame (dynamo's cached code for the first model serves it): it counts as
    compiled, where it stayed eager for good before (no new graph was counted)."""
    a, _ = warm
    monkeypatch.setenv("UNMASK_COMPILE", "on")
    b = load_model(str(a.path), device="cpu")
    decode(b)                                                  # queues b's bucket, served eagerly meanwhile
    comp = compiled.Compiled.of(b)
    assert comp.wait(600) and comp.ready and comp.failed is None
    got = decode(b)
    assert got.meta.forward_path == {"compiled": got.nfe}


def test_a_new_pool_of_a_compiled_capacity_runs_compiled_at_once(warm, monkeypatch):
    """A pool nobody holds a row of goes when a decode needs another capacity (``StaticPath.slot_cache``, as
    between a class's waves); the next pool of the first capacity is a new object whose buckets have the compiled
    shapes: they run compiled from its first forward. Keyed by the pool's identity, each such pool queued its
    buckets again, ran them eagerly meanwhile and, past ``MAX_SHAPES`` of them, stayed eager for good."""
    from engine.models.static import StaticPath
    a, _ = warm
    monkeypatch.setenv("UNMASK_COMPILE", "on")
    path, comp = StaticPath.of(a), compiled.Compiled.of(a)
    decode(a)
    (S, pool), = path.pools.items()
    path._drop_stale(path.pools.pop(S), every=True)           # as slot_cache drops an idle pool
    queued = set(comp.queued)
    got = decode(a)
    assert path.pools[S] is not pool and comp.queued == queued
    assert got.meta.forward_path == {"compiled": got.nfe}


def test_a_compile_holds_the_device_lock_a_capture_never_waits_for():
    assert not compiled.DEVICE_WORK.locked()
    with compiled.exclusive() as mine:
        assert mine and compiled.DEVICE_WORK.locked()
        with compiled.exclusive() as again:                    # held (as by a running compile): skip, never wait
            assert not again
    assert not compiled.DEVICE_WORK.locked()


def test_a_missing_compiler_decodes_eagerly_with_one_log_line(sdar_dir, monkeypatch, capsys):
    monkeypatch.setenv("UNMASK_COMPILE", "on")
    monkeypatch.setenv("CXX", "/nonexistent/g++")
    a = load_model(str(sdar_dir), device="cpu")
    runs = [decode(a) for _ in range(2)]
    lines = [x for x in capsys.readouterr().err.splitlines() if "compiled forward off" in x]
    assert lines == [f"unmask: compiled forward off for {a.name}, eager instead: no C++ compiler "
                     "('/nonexistent/g++' not found)"]
    assert all(set(t.meta.forward_path) == {"static eager"} for t in runs) and compiled.Compiled.of(a).thread is None
    assert runs[0].meta.compiled == "eager: no C++ compiler ('/nonexistent/g++' not found)"
    assert runs[0].meta.token_ids == eager_decode(a, monkeypatch).meta.token_ids


def test_a_failing_compile_falls_back_to_eager_with_one_log_line(sdar_dir, monkeypatch, capsys):
    monkeypatch.setenv("UNMASK_COMPILE", "on")
    a = load_model(str(sdar_dir), device="cpu")
    comp = compiled.Compiled.of(a)

    def fails(**kw):
        held.append(compiled.DEVICE_WORK.locked())             # a compile runs holding the capture's lock
        raise RuntimeError("injected compiler failure")
    held, comp.fn = [], fails
    first = decode(a)
    assert comp.wait(60) and comp.failed == "RuntimeError: injected compiler failure" and held == [True]
    again = decode(a)
    lines = [x for x in capsys.readouterr().err.splitlines() if "compiled forward off" in x]
    assert len(lines) == 1 and "the compile failed (RuntimeError: injected compiler failure)" in lines[0]
    assert set(again.meta.forward_path) == {"static eager"} and again.meta.compiled.startswith("eager: RuntimeError")
    assert first.meta.token_ids == again.meta.token_ids == eager_decode(a, monkeypatch).meta.token_ids
