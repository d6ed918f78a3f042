"""Where a decode's numbers live: the device statistics and the way across to the host.

A forward's logits (q, V) and every distribution made from them stay on the model's device: the rules' reductions
over the vocabulary (a probability of given tokens, a top-2 gap, a KL to the previous forward, a window's average,
a credit map) run there, and only their results, (rows × a few) numbers, cross to the host. What crosses, per
forward, therefore never grows with the vocabulary (``tests/test_host_copies.py`` counts it at V = 1 000 and
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

import torch

READBACK: Counter = Counter()      # what ``host`` copied in this process: "bytes", "copies" (the GPU check reads it)


def to_device(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A host tensor (an index, a mask, a few tokens) on ``like``'s device, to meet it in an op. (A tensor subclass
    that stands in for a device in the tests is kept: ``tests/on_device.py``.)"""
    x = torch.as_tensor(x).to(like.device)
    return x.as_subclass(type(like)) if type(like) is not torch.Tensor and type(x) is torch.Tensor else x


def host(x: torch.Tensor) -> torch.Tensor:
    """A small device result (rows × a few) on the host: the way the rules and the round's statistics read the
    device, counted in ``READBACK``."""
    READBACK["bytes"] += x.numel() * x.element_size()
    READBACK["copies"] += 1
    return x.cpu()


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
