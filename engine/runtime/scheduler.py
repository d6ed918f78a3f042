"""The requests a decode makes of a model, and one round of them (the engine loop, ``engine.runtime.engine_loop``,
runs the rounds).

A decode is a generator. Where it needs the model it yields a request and receives the result:

    logits, stats = yield Forward(...)     # nested: ``logits, stats = yield from ctx.draft()``

``run_round`` runs one round of requests: the ``Forward`` requests of each model as one batched forward (the layout
that suits the device: ``engine.runtime.batch``), then the token statistics (softmax, top-k, entropy, margin) of every
request that asks for them in one batched call per sampling setting, on the model's device (``engine.runtime.device``:
the logits and distributions stay there; only the statistics' one small copy per round crosses); a ``Call`` (the
uniform canvas's encoder and decoder, whose masks come from DiffusionGemma's own builders for one canvas) runs
alone. Only then does each decode's rule run, when the scheduler sends it its result.

The order of requests in a round is the order in which their decodes joined the engine loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch
from transformers import DynamicCache

from engine.runtime.batch import run_forwards
from engine.runtime.sampling import TokenStats, token_stats_batch


@dataclass
class Sampling:
    """How a forward's rows become token statistics (``engine.runtime.sampling``); ``generator``: the decode's
    device generator (``engine.runtime.device``)."""
    temperature: float
    top_k: int
    top_p: float
    generator: torch.Generator
    mask_id: int
    precision: torch.dtype = torch.float64      # the softmax's dtype: float64, or the model's (``precision=model``)

    def key(self) -> tuple:
        return self.temperature, self.top_k, self.top_p, self.mask_id, self.precision


@dataclass
class Forward:
    """One decode's forward: ids (q,), a (q, c + q) bool mask over its cache and queries, positions (q,). With
    ``sampling``, the result carries the statistics of rows ``rows`` of the logits. The logits stay on the model's
    device: a rule reduces them there (``engine.runtime.device``)."""
    adapter: object
    ids: torch.Tensor
    mask: torch.Tensor
    pos: torch.Tensor
    cache: DynamicCache | None
    sampling: Sampling | None = None
    rows: slice = field(default_factory=lambda: slice(None))
    path: str = "eager"                 # how it ran (``engine.runtime.batch.run_forwards``)
    owner: object = None                # the runner that made it (its decode's bytes: ``engine.runtime.share``)


@dataclass
class Call:
    """A forward that runs alone: ``fn(*args)``'s value is the result."""
    fn: Callable
    args: tuple


Request = Forward | Call


def run_round(reqs: list[Request]) -> list:
    """Every request's result, in order: (logits (q, V), TokenStats | None) for a Forward, the value for a Call."""
    out: list = [None] * len(reqs)
    by_model: dict[int, list[int]] = {}
    for i, r in enumerate(reqs):
        if isinstance(r, Call):
            out[i] = r.fn(*r.args)
        else:
            by_model.setdefault(id(r.adapter), []).append(i)
    for idx in by_model.values():
        for i, logits in zip(idx, run_forwards(reqs[idx[0]].adapter, [reqs[i] for i in idx])):
            out[i] = [logits, None]
    by_sampling: dict[tuple, list[int]] = {}
    for i, r in enumerate(reqs):
        if isinstance(r, Forward) and r.sampling is not None:
            by_sampling.setdefault(r.sampling.key(), []).append(i)
    for idx in by_sampling.values():
        s = reqs[idx[0]].sampling
        stats = token_stats_batch([out[i][0][reqs[i].rows] for i in idx], s.temperature, s.top_k, s.top_p,
                                  [reqs[i].sampling.generator for i in idx], s.mask_id, s.precision)
        for i, st in zip(idx, stats):
            out[i][1] = st
    return [tuple(o) if isinstance(reqs[i], Forward) else o for i, o in enumerate(out)]


__all__ = ["Call", "Forward", "Sampling", "TokenStats", "run_round"]
