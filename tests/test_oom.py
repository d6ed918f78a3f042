"""Out of device memory that recovers on every path (engine.runtime.rounds, engine.models.static): the error injected
on the CPU at each allocation site of a round (the model's forward, the output projection, the token statistics, a
graph capture), on the eager path and the static path (slot caches). A retried round starts from what its requests
were before it (cache lengths, device generators), frees what the failed attempt allocated before it runs again, and
every decode's tokens and records equal those of a run that never failed; a round that raises is counted and logged.
"""

from __future__ import annotations

import logging
import weakref
from collections import Counter

import pytest
import torch

from engine.decoders import build_decoder
from engine.catalogue.spec import parse_spec
from engine.models import static
from engine.runtime import rounds, sampling, scheduler
from engine.runtime.engine_loop import EngineLoop, Job
from engine.runtime.loop import Generation
from engine.tasks import get_task
from tests.test_batch import same_records

# greedy and sampled decodes (T > 0: their tokens follow the device generator's noise), sharing every round
T = "threshold:tau=0.5,block_size=4,gen_length=12"
SPECS = [T, f"{T},temperature=1.0,seed=3", "llada:block_size=4,steps=2,gen_length=12",
         "llada:block_size=4,steps=2,gen_length=12,temperature=1.0,seed=8"]
FULL = ["llada:block_size=4,steps=2,gen_length=12,temperature=1.0,seed=2", f"{T},kv_cache=dual",
        f"{T},kv_cache=prefix,temperature=1.0,seed=5", "llada:block_size=4,steps=2,gen_length=12"]


def oom() -> torch.OutOfMemoryError:
    return torch.OutOfMemoryError("CUDA out of memory (injected)")


def fail_once(monkeypatch, obj, name: str, k: int, then=None) -> list:
    """``obj.name`` runs as before, then raises out of memory after its k-th call, or the first one after it made
    in a round of several requests (so the round runs again in halves, and what that call grew, wrote or drew
    stays changed; what ``then(result)`` returns is held by the failing frame). Returns the list of its calls."""
    real, calls, failed = getattr(obj, name), [], []
    round_size, run_round = [0], scheduler.run_round

    def sized(reqs):
        round_size[0] = len(reqs)
        return run_round(reqs)

    def failing(*args, **kwargs):
        out = real(*args, **kwargs)
        calls.append(1)
        if len(calls) >= k and round_size[0] > 1 and not failed:
            failed.append(1)
            kept = then(out) if then is not None else None     # noqa: F841 - held by this frame as it raises
            raise oom()
        return out
    monkeypatch.setattr(scheduler, "run_round", sized)
    monkeypatch.setattr(obj, name, failing)
    return failed


def makers(model, specs: list[str]) -> list:
    probs = get_task("arith").problems("test", len(specs), seed=5)
    return [lambda p=p, sp=parse_spec(s): Generation(model, p.prompt, build_decoder(sp[0], **sp[1]))
            for p, s in zip(probs, specs)]


def through_loop(make: list) -> tuple[list, EngineLoop]:
    loop = EngineLoop(max_running=8)
    hs = loop.submit_many([Job(lambda m=m: m().requests()) for m in make])
    return [h.result(timeout=120) for h in hs], loop


@pytest.fixture(scope="module")
def llada(tmp_path_factory):
    from engine.models.model import load_model
    from tests.families import write_llada
    return load_model(str(write_llada(tmp_path_factory.mktemp("oom") / "llada")[0]), device="cpu")


def site(model, where: str):
    """The object and attribute a round allocates through at ``where``."""
    return {"forward": (model.model.get_decoder(), "forward"),
            "head": (model.model.get_output_embeddings(), "forward"),
            "statistics": (sampling, "_stats")}[where]


@pytest.mark.parametrize("where", ["forward", "head", "statistics"])
@pytest.mark.parametrize("path", ["off", "on"])
def test_a_round_out_of_memory_at_each_site_gives_the_unfailed_decodes(adapter, llada, monkeypatch, path, where):
    """Block-causal decodes with a KV cache (a ``DynamicCache``, or slot caches on the static path) and full-attention
    ones without a cache and with Fast-dLLM's prefix and dual caches, greedy and sampled, in shared rounds: the third
    call at the site (or the first after it in a shared round) runs out of memory after it ran. The round runs again in halves and every decode equals its
    solo decode."""
    monkeypatch.setenv("UNMASK_STATIC", path)
    for model, specs in ((adapter, SPECS), (llada, FULL)):
        make = makers(model, specs)
        alone = [m().run() for m in make]
        with monkeypatch.context() as m:
            failed = fail_once(m, *site(model, where), 3)
            got, loop = through_loop(make)
        assert failed and loop.retries["out of memory"] >= 1 and not loop.retries["failed"], loop.retries
        for a, b in zip(alone, got):
            same_records(a, b)


@pytest.mark.parametrize("path", ["off", "on"])
def test_a_failed_attempt_holds_no_memory_at_the_retry(adapter, monkeypatch, path):
    """A 64 MiB tensor allocated in the failing frame (the projection that ran out) and the forward's output of the
    failed attempt are both gone when the retry begins: the error's traceback keeps no frame's tensors."""
    monkeypatch.setenv("UNMASK_STATIC", path)
    make = makers(adapter, SPECS[:2] * 2)
    alone = [m().run() for m in make]
    held, hidden, alive = [], [], []
    model = adapter.model
    real = model.get_decoder().forward

    def forward(*args, **kwargs):
        out = real(*args, **kwargs)
        hidden[:] = [weakref.ref(out.last_hidden_state)]           # the latest forward's (B, Q, hidden)
        return out
    monkeypatch.setattr(model.get_decoder(), "forward", forward)

    def allocate(out):
        big = torch.ones(16 << 20)                                   # 64 MiB, held by the failing frame
        held[:] = [weakref.ref(big)]
        return big
    fail_once(monkeypatch, *site(adapter, "head"), 3, then=allocate)
    monkeypatch.setattr(rounds, "free_device_memory", lambda: alive.append(
        sum(t.numel() * t.element_size() for t in (r() for r in held + hidden) if t is not None)))
    got, loop = through_loop(make)
    assert alive == [0]
    for a, b in zip(alone, got):
        same_records(a, b)


def test_a_retried_sampled_decode_draws_the_same_noise(adapter, monkeypatch):
    """The statistics run out of memory after the round's Gumbel noise was drawn from each decode's generator: the
    retry draws it again from the same state, so the sampled decodes' tokens equal the unfailed ones'."""
    specs = [f"threshold:tau=0.5,block_size=4,gen_length=12,temperature=1.0,seed={s}" for s in range(4)]
    make = makers(adapter, specs)
    alone = [m().run() for m in make]
    failed = fail_once(monkeypatch, sampling, "_stats", 2)
    got, loop = through_loop(make)
    assert failed and loop.retries["out of memory"] == 1
    for a, b in zip(alone, got):
        same_records(a, b)


def test_a_capture_out_of_memory_marks_its_bucket_and_is_not_tried_again(adapter, monkeypatch):
    """Graphs forced on (a CPU stands in): every capture runs the bucket's forward, as its warm-up does, then runs
    out of memory. The bucket is marked over budget and runs eagerly, the round goes on, and no bucket's capture
    is tried a second time, however many rounds meet it."""
    monkeypatch.setenv("UNMASK_STATIC", "on")
    make = makers(adapter, SPECS[:2] * 2)
    alone = [m().run() for m in make]
    monkeypatch.setattr(static, "enabled", lambda device: (True, True))
    monkeypatch.setattr(torch.cuda, "graph_pool_handle", lambda: None)
    tried, met = [], Counter()
    real_call = static.StaticPath._call

    def record(self, bk):
        tried.append((bk.B, bk.Q, bk.pool is None))
        self._call(bk)
        raise oom()

    def call(self, bk):
        met[(bk.B, bk.Q, bk.pool is None)] += 1
        return real_call(self, bk)
    monkeypatch.setattr(static.StaticPath, "_record", record)
    monkeypatch.setattr(static.StaticPath, "_call", call)
    got, loop = through_loop(make)
    path = adapter.__dict__["_static"]
    assert tried and len(tried) == len(set(tried)) and max(met.values()) > 2, (tried, met)
    assert all(bk.over_budget and bk.graph is None for bk in path.buckets.values() if (bk.B, bk.Q, bk.pool is None)
               in tried) and not loop.retries
    for a, b in zip(alone, got):
        same_records(a, b)


def test_a_round_that_raises_is_counted_and_logged(adapter, caplog):
    """A bad request (its mask does not fit its queries) breaks its round: the round runs again request by request,
    which is counted (``EngineLoop.retries``) and logged with the error, and the bad decode fails alone."""
    from engine.runtime.scheduler import Forward
    make = makers(adapter, SPECS[:2])
    alone = [m().run() for m in make]

    def broken():
        yield Forward(adapter, torch.tensor([5, 6, 7]), torch.ones(2, 9, dtype=torch.bool), torch.arange(3), None)
    loop = EngineLoop(max_running=8)
    with caplog.at_level(logging.WARNING, logger="engine.runtime.rounds"):
        hs = loop.submit_many([Job(lambda m=m: m().requests()) for m in make] + [Job(broken)])
        with pytest.raises(RuntimeError):
            hs[2].result(timeout=60)
        got = [h.result(timeout=60) for h in hs[:2]]
    assert loop.retries == Counter({"raised": 1, "failed": 1})
    lines = [r.getMessage() for r in caplog.records]
    assert any("round of 3 requests raised; each runs again alone (RuntimeError" in x for x in lines), lines
    for a, b in zip(alone, got):
        same_records(a, b)


def test_a_canvas_encoder_call_in_a_retried_round_is_rewound(adapter, monkeypatch):
    """The uniform canvas's encoder ``Call`` extends its cache in place; a round it shares with another model's
    forward runs out of memory in the statistics, after the call ran: the retry encodes again from the cache as it
    was, and both decodes equal their solo decodes."""
    from engine.models.model import load_model
    canvas = load_model("unmask-uniform-small", device="cpu")
    probs = get_task("arith").problems("test", 2, seed=11)
    make = [lambda: Generation(canvas, probs[0].prompt, build_decoder("uniform")),
            lambda: Generation(adapter, probs[1].prompt, build_decoder("threshold", tau=0.5, block_size=4,
                                                                       gen_length=12))]
    alone = [m().run() for m in make]
    encoded = []
    real = canvas.encode
    monkeypatch.setattr(canvas, "encode", lambda *a: encoded.append(1) or real(*a))
    failed = fail_once(monkeypatch, sampling, "_stats", 1)
    got, loop = through_loop(make)
    assert failed and encoded and loop.retries["out of memory"] == 1
    for a, b in zip(alone, got):
        same_records(a, b)


def test_no_capture_while_a_compile_runs(adapter, monkeypatch):
    """Graphs forced on (a CPU stands in) while a compile holds ``compiled.DEVICE_WORK``: no bucket is captured
    (CUDA refuses a capture beside another thread's work), none is marked over budget, the decodes run eagerly over
    their buffers and equal their solo ones; once the lock is free, the next round captures."""
    from engine.models import compiled
    monkeypatch.setenv("UNMASK_STATIC", "on")
    make = makers(adapter, SPECS[:2])
    alone = [m().run() for m in make]
    monkeypatch.setattr(static, "enabled", lambda device: (True, True))
    monkeypatch.setattr(torch.cuda, "graph_pool_handle", lambda: None)
    tried = []
    monkeypatch.setattr(static.StaticPath, "_record", lambda self, bk: tried.append((bk.B, bk.Q)))
    with compiled.DEVICE_WORK:                                # a compile running on its thread
        got, _ = through_loop(make)
    path = adapter.__dict__["_static"]
    assert not tried and not any(bk.over_budget for bk in path.buckets.values())
    for a, b in zip(alone, got):
        same_records(a, b)
    through_loop(makers(adapter, SPECS[:1]))
    assert tried                                              # free again: the next round captures
