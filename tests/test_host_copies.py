"""Device-to-host copies per round: one, whatever the decodes in it, for the decoders that read only the small
statistics (``Policy.reads_distribution`` False). An accelerator is stood in for by ``OnDevice``, a CPU tensor
whose descendants stay "on the device" and whose every way back to the host is counted, so a later change that adds
a copy (a ``.numpy()`` of the logits, an ``int()`` of a device value) fails here without a GPU."""

from __future__ import annotations

import pytest
import torch

from engine.decoders import build_decoder, parse_spec
from engine.models.model import ModelAdapter, load_model
from engine.runtime.engine_loop import Job
from engine.runtime.jobs import configure
from engine.runtime.loop import Generation
from engine.tasks import get_task

T = torch.Tensor
TO_HOST = {T.cpu, T.numpy, T.tolist, T.item, T.__bool__, T.__int__, T.__float__, T.__index__, T.__array__}


class OnDevice(torch.Tensor):
    """Computed from the model's logits: ops keep the type (torch's subclass rule); a way to the host is counted
    and gives a plain tensor."""
    copies: list[str] = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in TO_HOST:
            cls.copies.append(func.__name__)
            with torch._C.DisableTorchFunctionSubclass():
                plain = args[0].as_subclass(torch.Tensor)
            return func(plain, *args[1:], **(kwargs or {}))
        return super().__torch_function__(func, types, args, kwargs)


@pytest.fixture(scope="module")
def model():
    return load_model("tiny", device="cpu")


@pytest.fixture
def on_device(monkeypatch):
    """Every forward's logits come back ``OnDevice``; ``calls``: the model's batched forwards (one per round)."""
    calls, run = [], ModelAdapter.run

    def run_on_device(self, *args, **kwargs):
        calls.append(1)
        return run(self, *args, **kwargs).as_subclass(OnDevice)
    monkeypatch.setattr(ModelAdapter, "run", run_on_device)
    OnDevice.copies = []
    return calls


PROMPTS = [p.prompt for p in get_task("arith").problems("test", 4, seed=3)]
SPECS = ["llada:block_size=8,steps=8", "threshold:tau=0.9,block_size=8", "threshold:tau=0.9,block_size=8,use_cache=0",
         "threshold:rule=sdar,tau=0.7,block_size=16,steps=4", "ar", "remdm:block_size=8,steps=4",
         "eb:block_size=8", "llada:block_size=8,steps=4,remasking=random,temperature=1,seed=3"]


def decode(model, spec: str, prompt: str):
    name, params = parse_spec(spec)
    return Generation(model, prompt, build_decoder(name, **params)).run()


@pytest.mark.parametrize("spec", SPECS)
def test_one_copy_per_forward(model, on_device, spec):
    want = decode(model, spec, PROMPTS[0]).meta.token_ids           # before the patch's copies are counted
    OnDevice.copies = []
    got = decode(model, spec, PROMPTS[0])
    assert got.meta.token_ids == want
    assert len(on_device) == got.meta.nfe * 2                         # the uncounted decode's forwards, then these
    assert OnDevice.copies == ["cpu"] * got.meta.nfe                  # the statistics' one copy, per forward


@pytest.mark.parametrize("spec", ["threshold:tau=0.9,block_size=8", "llada:block_size=8,steps=8"])
def test_one_copy_per_round_for_a_batch(model, on_device, spec):
    """Four decodes at once share rounds: one copy per round, not per decode."""
    name, params = parse_spec(spec)
    loop = configure(max_running=len(PROMPTS), round_tokens=1 << 20)   # conftest restores them after the test
    gens = [Generation(model, p, build_decoder(name, **params)) for p in PROMPTS]
    handles = loop.submit_many([Job(g.requests) for g in gens])       # all four join before the first round
    traces = [h.result(timeout=120) for h in handles]
    assert len(OnDevice.copies) == len(on_device) < sum(t.meta.nfe for t in traces)
    assert set(OnDevice.copies) == {"cpu"}


def test_a_decoder_that_reads_the_distribution_gets_it_on_the_host(model, on_device):
    """WINO reads p(written token) from ``probs``: its logits and probs are copied, and its tokens are unchanged."""
    want = decode(model, "wino:block_size=8", PROMPTS[1]).meta.token_ids
    OnDevice.copies = []
    got = decode(model, "wino:block_size=8", PROMPTS[1])
    assert got.meta.token_ids == want and OnDevice.copies.count("cpu") > got.meta.nfe
