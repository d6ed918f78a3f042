"""One loop schedules every decode, as vLLM's and SGLang's schedulers do.

A decode is a generator. Where it needs the model it yields a request and receives the result:

    logits, stats = yield Forward(...)     # nested: ``logits, stats = yield from ctx.draft()``

``run_round`` runs one round of requests: the ``Forward`` requests of each model as one batched forward (the layout
that suits the device: ``engine.runtime.batch``), then the token statistics (softmax, top-k, entropy, margin) of every
request that asks for them in one batched call per sampling setting; a ``Call`` (the uniform canvas's encoder and
decoder, whose masks come from DiffusionGemma's own builders for one canvas) runs alone. Only then does each
decode's rule run, when the scheduler sends it its result.

``run_batched`` keeps up to ``size`` decodes running: each round takes one request from each, and a decode that
ends hands its place to the next job before the next round. Batch 1 (the page, the API) is the same loop with one
decode (``Generation.steps``). There are no threads: the order of requests in a round is the jobs' order, so a
run is the same to the bit however often it is repeated.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Generator

import torch
from transformers import DynamicCache

from engine.runtime.batch import run_forwards
from engine.runtime.sampling import TokenStats, token_stats_batch


@dataclass
class Sampling:
    """How a forward's rows become token statistics (``engine.runtime.sampling``); ``generator``: the decode's own."""
    temperature: float
    top_k: int
    top_p: float
    generator: torch.Generator
    mask_id: int

    def key(self) -> tuple:
        return self.temperature, self.top_k, self.top_p, self.mask_id


@dataclass
class Forward:
    """One decode's forward: ids (q,), a (q, c + q) bool mask over its cache and queries, positions (q,). With
    ``sampling``, the result carries the statistics of rows ``rows`` of the logits."""
    adapter: object
    ids: torch.Tensor
    mask: torch.Tensor
    pos: torch.Tensor
    cache: DynamicCache | None
    sampling: Sampling | None = None
    rows: slice = field(default_factory=lambda: slice(None))


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
                                  [reqs[i].sampling.generator for i in idx], s.mask_id)
        for i, st in zip(idx, stats):
            out[i][1] = st
    return [tuple(o) if isinstance(reqs[i], Forward) else o for i, o in enumerate(out)]


def drive(decode: Generator):
    """Run one decode alone to its end; its return value."""
    result = None
    while True:
        try:
            req = decode.send(result)
        except StopIteration as e:
            return e.value
        result = run_round([req])[0]


@dataclass
class Failed:
    error: Exception


@dataclass
class _Running:
    index: int
    decode: Generator
    request: Request | None = None


class Scheduler:
    """Up to ``size`` of ``jobs`` (functions returning a decode generator) running at once, one request from each
    per round. ``seconds[i]``: job i's share of the run's time (each round's span, its forward and the rules run
    after it, split equally among the decodes of the round)."""

    def __init__(self, jobs: list[Callable[[], Generator]], size: int):
        self.jobs, self.size = jobs, max(1, size)
        self.seconds: dict[int, float] = {i: 0.0 for i in range(len(jobs))}
        self.rounds = 0
        self._ended: list[tuple[int, object]] = []
        self._next = 0

    def events(self):
        """(index, result, seconds) as each job ends. A job's exception is raised once every decode has ended."""
        running: list[_Running] = []
        mark, failed = time.perf_counter(), None
        while True:
            running = [r for r in running if self._advance(r)]
            while len(running) < self.size and self._next < len(self.jobs):   # refill before the next round
                job = _Running(self._next, None)
                self._next += 1
                job.decode = self._start(job.index)
                if job.decode is not None and self._advance(job):
                    running.append(job)
            for index, result in self._ended:
                if isinstance(result, Failed):
                    failed = failed or result.error
                else:
                    yield index, result, self.seconds[index]
            self._ended = []
            if not running:
                break
            try:
                results = run_round([r.request for r in running])
            except Exception as e:                    # every decode of the round fails with its forward
                for r in running:
                    r.decode.close()
                    self._ended.append((r.index, Failed(e)))
                running = []
                continue
            now = time.perf_counter()
            for r, res in zip(running, results):
                self.seconds[r.index] += (now - mark) / len(running)
                r.request = res                       # handed to the decode by _advance
            mark = now
            self.rounds += 1
        if failed is not None:
            raise failed

    def _start(self, index: int) -> Generator | None:
        try:
            return self.jobs[index]()
        except Exception as e:
            self._ended.append((index, Failed(e)))
            return None

    def _advance(self, r: _Running) -> bool:
        """Send the decode its result (None at its start) and run its rule to its next request: False once it
        has ended."""
        try:
            r.request = r.decode.send(r.request)
            return True
        except StopIteration as e:
            self._ended.append((r.index, e.value))
        except Exception as e:                        # raised by events() once every decode has ended
            self._ended.append((r.index, Failed(e)))
        return False


def run_batched(jobs: list[Callable[[], Generator]], size: int, seconds: dict | None = None) -> list:
    """Every job's result, in job order, with up to ``size`` decodes per round. A job's exception is raised here
    once every decode has ended. ``seconds`` (a dict) receives each job's share of the run's time."""
    s = Scheduler(jobs, size)
    results = {index: result for index, result, _ in s.events()}
    if seconds is not None:
        seconds.update(s.seconds)
    return [results[i] for i in range(len(jobs))]


__all__ = ["Call", "Failed", "Forward", "Sampling", "Scheduler", "TokenStats", "drive", "run_batched", "run_round"]
