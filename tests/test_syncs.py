"""Synchronisations per round that do not grow with the batch: every decoder run on the strict stand-in for a device
(``tests.on_device.OnDevice`` with ``syncs``: any read of the device other than the round's planned copy raises:
``.item()``, ``float()``, ``bool()``, ``.tolist()``, a host index, a device mask as an index, ``multinomial``), alone
and sixteen at once through the engine loop. The copies of each round (the statistics' one, and one ``Read`` phase
for the rules: ``engine.runtime.device.read_back``) are counted per round: at most two, and as many at batch 16 as at
batch 1."""

from __future__ import annotations

import threading

import pytest
import torch

from engine.decoders import build_decoder, parse_spec
from engine.runtime.device import READBACK
from engine.runtime.engine_loop import EngineLoop, Job
from engine.runtime.jobs import configure
from engine.runtime.loop import Generation
from engine.tasks import get_task
from tests.on_device import OnDevice, patch_forwards
from tests.test_host_copies import SPECS, model_of

PROMPTS = [p.prompt for p in get_task("arith").problems("test", 16, seed=3)]
PER_ROUND = 2              # the round's statistics copy and its rules' one read


@pytest.fixture(scope="module")
def models():
    from engine.models.model import load_model
    return {"tiny": load_model("tiny", device="cpu")}


def copies_per_round(monkeypatch, adapter, spec: str, batch: int) -> list[int]:
    """The host copies of each round of ``batch`` decodes of ``spec`` on the strict stand-in (every copy also
    counted in ``READBACK``: none bypasses ``engine.runtime.device.host``)."""
    per_round, step, idle = [], EngineLoop._step, threading.Event()

    def counted(loop):
        idle.clear()
        n, rounds = len(OnDevice.copies), loop.rounds
        step(loop)
        if loop.rounds > rounds:
            per_round.append(len(OnDevice.copies) - n)
        idle.set()
    with monkeypatch.context() as m:
        patch_forwards(m, 1000)
        m.setattr(EngineLoop, "_step", counted)
        OnDevice.reset(syncs=True)
        before = READBACK["copies"]
        name, params = parse_spec(spec)
        loop = configure(max_running=batch, round_tokens=1 << 20)     # conftest restores the limits afterwards
        gens = [Generation(adapter, p, build_decoder(name, **params)) for p in PROMPTS[:batch]]
        for h in loop.submit_many([Job(g.requests) for g in gens]):
            h.result(timeout=300)
        assert idle.wait(60)                          # the step that ended the last decode has ended too
        assert READBACK["copies"] - before == len(OnDevice.copies) == sum(per_round)
    return per_round


IDS = [spec.split(":")[0] + ("-T" if "top_p" in spec else "") for _, spec in SPECS]
CASES = [pytest.param(model, spec, id=i) for (model, spec), i in zip(SPECS, IDS)]


@pytest.mark.parametrize("model,spec", CASES)
def test_syncs_per_round_do_not_grow_with_the_batch(models, monkeypatch, model, spec):
    adapter = model_of(models, model)
    alone = copies_per_round(monkeypatch, adapter, spec, 1)
    many = copies_per_round(monkeypatch, adapter, spec, 16)
    assert max(alone) <= PER_ROUND and max(many) == max(alone), (alone, many)


def test_the_stand_in_fails_a_read_per_decode(models, monkeypatch):
    """A rule that reads one number of its probabilities per forward (``float()``) fails here (the check above
    can fail): injected into threshold's rule."""
    from engine.runtime.loop import BlockContext
    draft = BlockContext.draft

    def draft_and_read(self, block_mask=None):
        logits, st = yield from draft(self, block_mask)
        float(st.probs[0, 0])
        return logits, st
    monkeypatch.setattr(BlockContext, "draft", draft_and_read)
    with pytest.raises(RuntimeError, match="__float__ of a device tensor"):
        copies_per_round(monkeypatch, models["tiny"], "threshold:tau=0.9,block_size=8,gen_length=16", 1)


@pytest.mark.parametrize("model,spec", [("dream", "dream:gen_length=16,steps=8"),
                                        ("unmask-uniform-small", "uniform:seed=3")])
def test_the_records_candidates_are_ids_then_probabilities(models, model, spec):
    """The candidates a person inspects (``topk_ids``, ``topk_p``) of a rule that makes its own statistics: ids
    first, the best one the record's argmax (before: the probabilities cast to ids, all 0, and the ids as
    probabilities)."""
    name, params = parse_spec(spec)
    tr = Generation(model_of(models, model), PROMPTS[0], build_decoder(name, **params)).run()
    for rec in tr.records:
        if "topk_ids" in rec.extra:
            ids, p = rec.extra["topk_ids"], rec.extra["topk_p"]
            assert (ids[:, 0] == rec.candidate).all() and (p[:, 0] == pytest.approx(rec.confidence, abs=1e-6))
            assert (p[:, :-1] >= p[:, 1:]).all() and (p <= 1).all()


def sequential_accept(p, q, draft, generator, device_generator, zero_p="clamp"):
    """The acceptance as it was written before the read was planned: a coin per position, and at the first
    rejection one ``torch.multinomial`` from the residual, drawn then."""
    for k in range(len(draft)):
        pk, qk = float(p[k, draft[k]]), float(q[k, draft[k]])
        r = 0.0 if (pk <= 0 and zero_p == "reject") else min(1.0, qk / max(pk, 1e-12))
        if float(torch.rand((), dtype=torch.float64, generator=generator)) < r:
            continue
        resid = (q[k] - p[k]).clamp_min(0)
        dist = resid / resid.sum() if float(resid.sum()) > 0 and not (pk <= 0 and zero_p == "reject") else q[k]
        return k, int(torch.multinomial(dist.float(), 1, generator=device_generator))
    return len(draft), None


@pytest.mark.parametrize("on", ["device", "host"])
@pytest.mark.parametrize("shared", [True, False], ids=["one generator", "a device's own"])
def test_resamples_drawn_ahead_leave_the_stream_as_drawing_then(shared, on):
    """S2D2's and SimSD's resample at a rejection is drawn at every span position before the read on a device
    (``Resamples``; on the host only at the rejection): the token and both generators' states after the span equal
    drawing it only at the rejection, with the host's and the device's generators one (a CPU) or two (an
    accelerator)."""
    OnDevice.reset()
    from engine.decoders.s2d2.verify import accept_stochastic
    for seed in range(40):
        g = torch.Generator().manual_seed(seed)
        logits = torch.randn(2, 6, 50, generator=g) * 2
        p, q = torch.softmax(logits[0].double(), -1), torch.softmax(logits[1].double(), -1)
        draft = torch.multinomial(p.float(), 1, generator=g)[:, 0]
        gens = []
        for _ in range(2):
            host = torch.Generator().manual_seed(100 + seed)
            dev = host if shared else torch.Generator().manual_seed(200 + seed)
            gens.append((host, dev))
        (h0, d0), (h1, d1) = gens
        k, token = sequential_accept(p, q, draft, h0, d0, "reject" if seed % 2 else "clamp")
        pd, qd = (p.as_subclass(OnDevice), q.as_subclass(OnDevice)) if on == "device" else (p, q)
        v = accept_stochastic(pd, qd, draft, h1, zero_p="reject" if seed % 2 else "clamp", device_generator=d1)
        assert (v.accepted, v.token) == (k, token)
        assert torch.equal(h0.get_state(), h1.get_state()) and torch.equal(d0.get_state(), d1.get_state())


@pytest.mark.parametrize("model,spec", [
    ("tiny", "s2d2:router=always,block_size=8,temperature=1.5,seed=7,gen_length=32"),
    ("unmask-tasks-small", "simsd:block_size=8,acceptance=mrs,temperature=1,seed=2,gen_length=32"),
    ("dream", "klass:gen_length=16,block_size=4,temperature=0.5,top_p=0.9,seed=3"),
    ("dream", "prophet:gen_length=16,block_size=4,gap_scale=0.5,temperature=1,seed=3")], ids=lambda x: x[:12])
def test_the_device_path_decodes_as_the_host_path(models, monkeypatch, model, spec):
    """A draw made ahead on a device (a resample, a fallback, an exit's fill) gives the tokens and records the host
    path draws only when needed: the strict stand-in's decode equals the plain CPU decode."""
    adapter, name, params = model_of(models, model), *parse_spec(spec)
    prompt = PROMPTS[1]
    plain = Generation(adapter, prompt, build_decoder(name, **params)).run()
    with monkeypatch.context() as m:
        patch_forwards(m)
        OnDevice.reset(syncs=True)
        device = Generation(adapter, prompt, build_decoder(name, **params)).run()
    assert device.meta.token_ids == plain.meta.token_ids and len(device.records) == len(plain.records)
    for a, b in zip(plain.records, device.records):
        assert (a.tokens_after == b.tokens_after).all() and (a.candidate == b.candidate).all()
