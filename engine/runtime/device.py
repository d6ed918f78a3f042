"""Where a decode's numbers live: the device statistics and the way across to the host.

A forward's logits (q, V) and every distribution made from them stay on the model's device: the rules' reductions
over the vocabulary (a probability of given tokens, a top-2 gap, a KL to the previous forward, a window's average,
a credit map) run there, and only their results, (rows × a few) numbers, cross to the host: a rule asks for them
with a ``Read`` request, and the engine loop reads every decode's of a round in one copy (``read_back``), so the
host waits for the device at most twice a round (the statistics' copy, the rules' read) whatever the batch. What
crosses, per forward, therefore never grows with the vocabulary (``tests/test_host_copies.py`` counts it at V = 1 000 and
126 464). The typed record every forward carries is ``engine.runtime.sampling.TokenStats``: its small fields
(candidate, confidence, margin, entropy, top-k ids and probabilities) are the round's one batched copy, and its
``probs`` (q, V) stays on the device for the rules that reduce it further.

Random draws: a decode holds two generators seeded from its seed (``Runner``): the host's, for the few numbers a
rule draws on the host (acceptance coins, picks, fresh canvas noise), and the device's, for the noise drawn over
the vocabulary (Gumbel-max, multinomial draws). On a CPU they are one generator, so a seed gives the same stream
and the same tokens as before; on an accelerator the device's own generator draws there, so a seed gives the same
tokens on the same kind of device and the same distribution across kinds (``docs/architecture.md``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import torch

# what crossed in this process (the GPU check reads it): "copies" and "bytes" to the host (each copy waits for the
# device: a sync), "uploads" of small host tensors (queued without blocking: not a sync)
READBACK: Counter = Counter()


def to_device(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A host tensor (an index, a mask, a few tokens) on ``like``'s device, to meet it in an op, copied up without
    blocking (the host does not wait for the device's queue). (A tensor subclass that stands in for a device in the
    tests is kept: ``tests/on_device.py``.)"""
    x = torch.as_tensor(x)
    if x.device != like.device:
        READBACK["uploads"] += 1
        x = x.to(like.device, non_blocking=True)
    return x.as_subclass(type(like)) if type(like) is not torch.Tensor and type(x) is torch.Tensor else x


def host(x: torch.Tensor) -> torch.Tensor:
    """A small device result (rows × a few) on the host, counted in ``READBACK``: only the round reads the device
    (the statistics' copy, and ``read_back`` of the rules' ``Read`` requests)."""
    READBACK["bytes"] += x.numel() * x.element_size()
    READBACK["copies"] += 1
    return x.cpu()


def on_host(x: torch.Tensor) -> bool:
    """Whether ``x`` is a host tensor already (a subclass stands for a device in the tests)."""
    return x.device.type == "cpu" and type(x) is torch.Tensor


@dataclass
class Read:
    """A rule's request for small device results (rows × a few numbers each) on the host: the engine loop reads the
    requests of every decode in its round in one copy (``read_back``), as vLLM's sampler hands the scheduler its
    sampled ids in one. A rule asks through ``read``."""
    tensors: tuple


def read(*tensors: torch.Tensor):
    """``a, b = yield from read(a, b)``: the tensors on the host, in their dtypes and shapes (a generator: the
    request goes to the engine loop with the round's others)."""
    return (yield Read(tensors))


def read_back(groups: list[tuple]) -> list[tuple]:
    """Every ``Read``'s tensors on the host: those on a device flattened into one float64 vector per device (ids
    and flags exact in float64), copied once, split and cast back; host tensors as they are."""
    flat = [t for g in groups for t in g]
    out = list(flat)
    by_device: dict = {}
    for i, t in enumerate(flat):
        if not on_host(t):
            by_device.setdefault(t.device, []).append(i)
    for idx in by_device.values():
        vec = host(torch.cat([flat[i].reshape(-1).to(torch.float64) for i in idx]))
        at = 0
        for i in idx:
            n = flat[i].numel()
            out[i] = vec[at:at + n].view(flat[i].shape).to(flat[i].dtype)
            at += n
    res, at = [], 0
    for g in groups:
        res.append(tuple(out[at:at + len(g)]))
        at += len(g)
    return res


def device_generator(seed: int, device, host_generator: torch.Generator) -> torch.Generator:
    """The decode's generator for noise drawn over the vocabulary: the host's own on a CPU (one stream, the
    tokens unchanged), else one of the device's seeded from the same seed."""
    device = torch.device(device)
    if device.type == "cpu":
        return host_generator
    g = torch.Generator(device=device)
    g.manual_seed(int(seed))
    return g


def rand_like_rows(shape, generator: torch.Generator, like: torch.Tensor) -> torch.Tensor:
    """Uniform float64 noise of ``shape`` drawn on ``like``'s device from ``generator`` (the decode's device
    generator): no (q, V) tensor crosses the bus."""
    return to_device(torch.rand(shape, dtype=torch.float64, generator=generator, device=generator.device), like)


def run_reads(rule):
    """Drive ``rule``, a generator that yields only ``Read`` requests, to its value, reading each at once (a rule
    called outside the engine loop: the tests, a tool)."""
    value = None
    while True:
        try:
            req = rule.send(value)
        except StopIteration as e:
            return e.value
        value = read_back([req.tensors])[0]


def generator_at(generator: torch.Generator, state: torch.Tensor) -> torch.Generator:
    """A generator of ``generator``'s device at ``state``: a draw made before the rule knows whether it needs it,
    from where the stream would stand if it did (``engine.decoders.s2d2.verify.Resamples``)."""
    g = torch.Generator(device=generator.device)
    g.set_state(state)
    return g
