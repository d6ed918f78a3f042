"""The static forward path (engine/models/static.py, engine/models/slots.py) on the CPU: the golden decodes, Fast-dLLM's
caches, batched rounds and the slot pool give what today's path gives (fp32: same tokens, records within 1e-5)."""

import gc
import json
import sys
import threading

import numpy as np
import pytest

from engine.decoders import build_decoder, parse_spec
from engine.models import static
from engine.models.static import StaticPath, b_bucket, q_bucket
from engine.runtime.jobs import run_batched
from engine.runtime.loop import Generation
from engine.settings import SettingError, get
from engine.tasks import get_task
from tests.golden import ALL, GOLDEN, OTHER_SPECS, SPECS, dream_model, key, summarise


@pytest.fixture
def on(monkeypatch):
    monkeypatch.setenv("UNMASK_STATIC", "on")


@pytest.fixture(scope="module")
def dream():
    return dream_model()


@pytest.fixture(scope="module")
def tiny():
    from engine.models.model import load_model
    return load_model("tiny", device="cpu")


def decode(model, prompt, spec: str):
    name, params = parse_spec(spec)
    return Generation(model, prompt, build_decoder(name, **params)).run()


def test_buckets_pad_little_and_hold_every_size():
    for q in range(1, 5000):
        b = q_bucket(q)
        assert q <= b <= (-(-q // 16) * 16 if q <= 64 else q * 1.125) and b % 8 == 0     # 12.5 % past 64
    assert [b_bucket(n) for n in (1, 3, 9, 64)] == [1, 4, 12, 64] and b_bucket(65) is None


def test_settings_are_checked(monkeypatch):
    monkeypatch.setenv("UNMASK_STATIC", "always")
    with pytest.raises(SettingError, match="auto, on, off"):
        get("UNMASK_STATIC")
    monkeypatch.setenv("UNMASK_STATIC", "auto")
    assert static.enabled("cpu") == (False, False)          # today's path on a CPU unless asked
    monkeypatch.setenv("UNMASK_STATIC", "on")
    monkeypatch.setenv("UNMASK_CUDA_GRAPHS", "1")
    assert static.enabled("cpu") == (True, False)           # no graphs without CUDA


def test_golden_decodes_on_the_static_path(on, tiny, dream):
    """Every golden decode, its forwards on the static path (the record says so), equals the recorded one."""
    from engine.models.model import load_model
    want = json.loads(GOLDEN.read_text())
    prompts = [p.prompt for p in get_task("arith").problems("test", 3, seed=7)]
    stories = [p.prompt for p in get_task("story").problems("test", 2, seed=7)]
    extra = {"dream": dream}
    for model, spec in [("tiny", s) for s in SPECS] + OTHER_SPECS:
        adapter = tiny if model == "tiny" else extra.get(model) or extra.setdefault(
            model, load_model(model, device="cpu"))
        for w, p in zip(want[key(model, spec)], stories if model == "unmask-tasks-small" else prompts, strict=True):
            tr = decode(adapter, p, spec)
            g = summarise(tr)
            assert g["token_ids"] == w["token_ids"] and g["nfe"] == w["nfe"], spec
            for rg, rw in zip(g["records"], w["records"], strict=True):
                assert rg["reason"] == rw["reason"] and rg["committed"] == rw["committed"], spec
                assert rg["conf"] == pytest.approx(rw["conf"], abs=1.5e-4), spec
            paths = set(tr.meta.forward_path)
            assert paths <= {"static eager"} and (paths or "uniform" in spec), (spec, paths)
    assert len(want) == len(ALL)


@pytest.mark.parametrize("kv", ["none", "prefix", "dual"])
def test_fast_dllm_caches_equal_todays_path(monkeypatch, dream, kv):
    """LLaDA-style decodes over Fast-dLLM's caches: the same tokens, NFE and confidences (1e-5) on both paths."""
    spec = f"llada:gen_length=24,block_size=8,steps=12,kv_cache={kv}"
    prompts = [p.prompt for p in get_task("arith").problems("test", 3, seed=3)]
    monkeypatch.setenv("UNMASK_STATIC", "off")
    before = [decode(dream, p, spec) for p in prompts]
    monkeypatch.setenv("UNMASK_STATIC", "on")
    after = [decode(dream, p, spec) for p in prompts]
    for a, b in zip(before, after):
        assert a.meta.token_ids == b.meta.token_ids and a.nfe == b.nfe
        assert set(b.meta.forward_path) == {"static eager"} and set(a.meta.forward_path) == {"eager"}
        for ra, rb in zip(a.records, b.records, strict=True):
            np.testing.assert_allclose(ra.confidence, rb.confidence, atol=1e-5)


def test_a_batched_static_round_equals_each_decode_alone(on, tiny):
    """Decodes of different prompt lengths, with and without the block cache, share padded static rounds and
    write the tokens each writes alone on today's path; their cache rows go back to the pool when they end."""
    m = tiny
    prompts = [p.prompt for p in get_task("mix").problems("test", 4, seed=5)]
    specs = ["threshold:tau=0.9,block_size=8", "s2d2:router=always,block_size=4", "ar:use_cache=0"]
    jobs = [(lambda p=p, s=s: Generation(m, p, build_decoder(parse_spec(s)[0], **parse_spec(s)[1])).requests())
            for p in prompts for s in specs]
    batched = run_batched(jobs, 8)
    solo = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("UNMASK_STATIC", "off")
        solo = [decode(m, p, s) for p in prompts for s in specs]
    assert [t.meta.token_ids for t in batched] == [t.meta.token_ids for t in solo]
    assert all(set(t.meta.forward_path) == {"static eager"} for t in batched)
    del batched, jobs
    gc.collect()
    pools = StaticPath.of(m).pools.values()
    assert pools and all(len(p.free) == p.rows for p in pools)     # every row back


def test_a_slot_cache_rolls_back_by_an_integer(on, tiny):
    path = StaticPath.of(tiny)
    cache = path.slot_cache(100)
    assert cache.pool.S == 256 and cache.get_seq_length() == 0
    cache.length = 40
    cache.crop(-15)
    assert cache.get_seq_length() == 25
    with pytest.raises(AssertionError):
        cache.crop(3)
    splice = cache.splice(10, 18)
    assert splice.get_seq_length() == 17 and splice.row == cache.row


def test_graphs_only_on_a_cuda_device_and_never_under_zerogpu(monkeypatch):
    """The decision itself (no GPU needed): graphs on a CUDA device by default, off with UNMASK_CUDA_GRAPHS=0 (a
    ZeroGPU lease), never on a CPU; UNMASK_STATIC=off keeps today's path everywhere."""
    monkeypatch.delenv("UNMASK_STATIC", raising=False)
    monkeypatch.delenv("UNMASK_CUDA_GRAPHS", raising=False)
    assert static.enabled("cuda") == (True, True) and static.enabled("cpu") == (False, False)
    monkeypatch.setenv("UNMASK_CUDA_GRAPHS", "0")
    assert static.enabled("cuda") == (True, False)
    monkeypatch.setenv("UNMASK_STATIC", "off")
    assert static.enabled("cuda") == (False, False)


def test_decodes_that_arrive_together_get_their_own_cache_rows(on, tiny):
    """A decode's cache row is taken on its visitor's thread (issue 75): eight at once, each with a pool to grow,
    get eight rows. Unlocked, concurrent grows handed several decodes one row (through the app, a class's answers
    then read each other's K/V: 3 of 4 differed from solo)."""
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)                   # the GIL changes hands often, as under a loaded server's threads
    try:
        for _ in range(10):
            path, start, caches = StaticPath(tiny, graphs=False), threading.Barrier(8), []
            def make():
                start.wait()
                caches.append(path.slot_cache(100))
            threads = [threading.Thread(target=make) for _ in range(8)]
            [t.start() for t in threads]
            [t.join() for t in threads]
            assert sorted(c.row for c in caches) == list(range(8))
    finally:
        sys.setswitchinterval(switch)
