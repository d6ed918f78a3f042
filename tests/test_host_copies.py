"""What crosses from the device to the host, per forward, for every decoder: never a row of the vocabulary. An
accelerator is stood in for by ``tests.on_device.OnDevice`` (strict, syncs on: a host tensor meeting a device
tensor, a ``.numpy()`` of one, or a read that makes the host wait outside the round's copies, ``tests/test_syncs.py``,
raises as CUDA would), and the model's output layer is widened from 1 000 to 126 464 tokens
(LLaDA's vocabulary): the bytes read back per forward must not grow with it. Both forward paths are covered (today's
and the static one, ``UNMASK_STATIC=on``)."""

from __future__ import annotations

import pytest

from engine.decoders import build_decoder, parse_spec
from engine.models.model import load_model
from engine.runtime.engine_loop import Job
from engine.runtime.jobs import configure
from engine.runtime.loop import Generation
from engine.tasks import get_task
from tests.golden import dream_model
from tests.on_device import OnDevice, patch_forwards

NARROW, WIDE = 1000, 126_464
# one spec per decoder (sixteen), short, sampling where the rule draws over the vocabulary
SPECS = [("tiny", "ar:gen_length=8"), ("tiny", "llada:block_size=8,steps=4,gen_length=16"),
         ("tiny", "threshold:tau=0.9,block_size=8,gen_length=16"), ("tiny", "eb:block_size=8,gen_length=16"),
         ("tiny", "s2d2:router=always,block_size=8,temperature=1,seed=5,gen_length=16"),
         ("tiny", "tspd:block_size=8,gen_length=16"), ("tiny", "prophet:block_size=8,gen_length=16"),
         ("tiny", "klass:block_size=8,temperature=1,seed=11,gen_length=16"),
         ("tiny", "credit:block_size=8,gen_length=16"), ("tiny", "edit:block_size=8,post_steps=1,gen_length=16"),
         ("tiny", "wino:block_size=8,gen_length=16"), ("tiny", "remdm:block_size=8,steps=4,gen_length=16"),
         ("tiny", "subblock:block_size=8,sub_block=4,temperature=1,seed=9,gen_length=16"),
         ("unmask-tasks-small", "simsd:block_size=8,acceptance=mrs,temperature=1,seed=2,gen_length=16"),
         ("unmask-uniform-small", "uniform:seed=3"), ("dream", "dream:gen_length=16,steps=8,temperature=1,seed=1"),
         # the releases' own samplers: ReMDM's nucleus, KLASS-on-Dream's fallback draw
         ("tiny", "remdm:block_size=8,steps=4,temperature=1,top_p=0.9,seed=2,gen_length=16"),
         ("dream", "klass:gen_length=16,block_size=4,temperature=0.5,top_p=0.9,seed=3")]
PROMPT = get_task("arith").problems("test", 1, seed=3)[0].prompt
STORY = get_task("story").problems("test", 1, seed=7)[0].prompt


@pytest.fixture(scope="module")
def models():
    return {"tiny": load_model("tiny", device="cpu")}


def model_of(models, name):
    if name not in models:
        models[name] = dream_model() if name == "dream" else load_model(name, device="cpu")
    return models[name]


def per_forward(monkeypatch, adapter, spec: str, width: int) -> tuple[float, list]:
    """Bytes read back per forward, and the generated ids, of one strict decode at ``width`` tokens."""
    with monkeypatch.context() as m:
        patch_forwards(m, width)
        OnDevice.reset(syncs=True)
        name, params = parse_spec(spec)
        prompt = STORY if adapter.name == "unmask-tasks-small" else PROMPT
        tr = Generation(adapter, prompt, build_decoder(name, **params)).run()
        return OnDevice.bytes() / tr.meta.nfe, tr.meta.token_ids


@pytest.mark.parametrize("model,spec", SPECS, ids=[s.split(":")[0] for _, s in SPECS])
def test_what_crosses_does_not_grow_with_the_vocabulary(models, monkeypatch, model, spec):
    adapter = model_of(models, model)
    narrow, _ = per_forward(monkeypatch, adapter, spec, NARROW)
    wide, _ = per_forward(monkeypatch, adapter, spec, WIDE)
    assert 0 < wide <= narrow * 1.05 + 64, (spec, narrow, wide)
    assert wide < 4096, (spec, wide)           # a few numbers per row: a 126 464-wide fp32 row alone is 506 KB


@pytest.mark.parametrize("spec", ["s2d2:router=always,block_size=8,gen_length=16",
                                  "klass:block_size=8,gen_length=16", "credit:block_size=8,gen_length=16"])
def test_the_static_path_reads_as_little(models, monkeypatch, spec):
    """The same rules on the static path (its buffers stand in for the device's): same tokens, same bytes."""
    adapter = models["tiny"]
    today, ids = per_forward(monkeypatch, adapter, spec, WIDE)
    monkeypatch.setenv("UNMASK_STATIC", "on")
    static, static_ids = per_forward(monkeypatch, adapter, spec, WIDE)
    assert static_ids == ids and static == pytest.approx(today)


def test_the_harness_sees_a_whole_row_cross(monkeypatch, models):
    """A rule that read its logits on the host would be counted (here: every forward's logits are copied after the
    round): the test above can fail."""
    from engine.runtime import scheduler
    calls = patch_forwards(monkeypatch, WIDE)
    OnDevice.reset(strict=True)
    run = scheduler.run_round
    monkeypatch.setattr(scheduler, "run_round", lambda reqs: [(r[0].cpu(), r[1]) for r in run(reqs)])
    Generation(models["tiny"], PROMPT, build_decoder("threshold", gen_length=8)).run()
    assert calls and OnDevice.bytes() >= len(calls) * WIDE * 4


@pytest.mark.parametrize("spec", ["threshold:tau=0.9,block_size=8", "llada:block_size=8,steps=8"])
def test_one_copy_per_round_for_a_batch(models, monkeypatch, spec):
    """Four decodes at once share rounds: one copy per round, not per decode."""
    calls = patch_forwards(monkeypatch)
    OnDevice.reset(syncs=True)
    prompts = [p.prompt for p in get_task("arith").problems("test", 4, seed=3)]
    name, params = parse_spec(spec)
    loop = configure(max_running=len(prompts), round_tokens=1 << 20)   # conftest restores them after the test
    gens = [Generation(models["tiny"], p, build_decoder(name, **params)) for p in prompts]
    handles = loop.submit_many([Job(g.requests) for g in gens])       # all four join before the first round
    traces = [h.result(timeout=120) for h in handles]
    assert len(OnDevice.copies) == len(calls) < sum(t.meta.nfe for t in traces)
    assert {what for what, _ in OnDevice.copies} == {"cpu"}
