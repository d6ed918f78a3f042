"""How callers reach the process's one engine loop (``engine.runtime.engine_loop``; ``engine_loop()`` starts it on
first use, ``configure`` sets its limits; a forked child starts its own): one decode to its end (``drive``), or many
with a cap on how many of them run at once (``Scheduler``, ``run_batched``: the bench, the Sweep, the lm-eval model,
the Ray workers)."""

from __future__ import annotations

import os
import threading
from typing import Callable, Generator

from engine.runtime.device import Read, read_back
from engine.runtime.engine_loop import EngineLoop, Group, Job
from engine.runtime.scheduler import Call, Forward, run_round

_LOOP: EngineLoop | None = None
_LOOP_LOCK = threading.Lock()


def engine_loop() -> EngineLoop:
    """The process's engine loop, started on first use (``configure`` sets its limits first), and again with the
    same limits and ledger after an entry point run in this process stopped it (``lifecycle.stop_all``: a CLI
    ``main`` called from a test or a notebook, which later work must not find dead; the page's gate holds that
    ledger, ``DecodeService.ledger``)."""
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None:
            _LOOP = EngineLoop(*default_limits())
        elif _LOOP.stopped:
            _LOOP = EngineLoop(_LOOP.max_running, _LOOP.round_tokens, ledger=_LOOP.ledger)
        return _LOOP


def _forget_loop_in_child() -> None:
    """In a forked child (a ZeroGPU worker, ``engine.harness.zerogpu``) the parent's loop is a husk: its thread
    did not come along, and its condition may have been held at the fork by that thread. The child starts a loop
    of its own on first use, behind a fresh lock (the old one may be held too)."""
    global _LOOP, _LOOP_LOCK
    _LOOP, _LOOP_LOCK = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_loop_in_child)


def default_limits() -> tuple[int, int]:
    """(max_running, round_tokens) from the operator's settings; max_running 0 means the device's default: 16 on
    a CPU (a round of 16 small decodes costs ~3x one decode's forward on two cores, so 16 visitors are served in
    ~1/5 of the time one after another), 64 on an accelerator (a forward of a few hundred tokens leaves it idle)."""
    import torch
    from engine import settings
    running = settings.get("UNMASK_MAX_RUNNING") or (64 if torch.cuda.is_available() else 16)
    return running, settings.get("UNMASK_ROUND_TOKENS")


def configure(max_running: int | None = None, round_tokens: int | None = None) -> EngineLoop:
    """Set the process loop's limits (the CLI's ``--batch``); they apply from the next admission on."""
    loop = engine_loop()
    with loop.cond:
        if max_running is not None:
            loop.max_running = max(1, int(max_running))
        if round_tokens is not None:
            loop.round_tokens = max(1, int(round_tokens))
    return loop


def drive(decode: Generator, client: str = ""):
    """Run one decode through the process loop to its end; its return value. On the engine thread itself (a
    decode's setup that needs another decode), inline."""
    loop = engine_loop()
    if loop.on_engine_thread():
        result = None
        while True:
            try:
                req = decode.send(result)
            except StopIteration as e:
                return e.value
            result = run_round([req])[0] if isinstance(req, (Forward, Call)) else \
                read_back([req.tensors])[0] if isinstance(req, Read) else None
    return loop.submit(Job(lambda: decode, client=client)).result()


class Scheduler:
    """``jobs`` (functions returning a decode generator) on the process loop, at most ``size`` of them running at
    once (with whatever else the loop runs). ``seconds[i]``: job i's share of the rounds it took part in (each
    round's span split equally among its decodes)."""

    def __init__(self, jobs: list[Callable[[], Generator]], size: int, client: str = ""):
        self.jobs, self.size, self.client = jobs, max(1, size), client
        self.seconds: dict[int, float] = {i: 0.0 for i in range(len(jobs))}
        self.rounds = 0

    def events(self):
        """(index, result, seconds) as each job ends, in the order they ended. A job's exception is raised once
        every job has ended; closing the generator early aborts the jobs not yet ended."""
        loop, group = engine_loop(), Group(self.size)
        rounds0 = loop.rounds
        handles = loop.submit_many([Job(j, self.client, group, index=i) for i, j in enumerate(self.jobs)])
        failed, left = None, len(handles)
        try:
            while left:
                with loop.cond:
                    while not group.ended:
                        loop.cond.wait()
                    h = group.ended.popleft()
                left -= 1
                self.seconds[h.job.index] = h.seconds
                if h.error is not None:
                    failed = failed or h.error
                else:
                    yield h.job.index, h.value, h.seconds
        finally:
            for h in handles:
                loop.abort(h)
            self.rounds = loop.rounds - rounds0
        if failed is not None:
            raise failed


def run_batched(jobs: list[Callable[[], Generator]], size: int, seconds: dict | None = None) -> list:
    """Every job's result, in job order, with up to ``size`` decodes per round. A job's exception is raised here
    once every decode has ended. ``seconds`` (a dict) receives each job's share of the run's time."""
    s = Scheduler(jobs, size)
    results = {index: result for index, result, _ in s.events()}
    if seconds is not None:
        seconds.update(s.seconds)
    return [results[i] for i in range(len(jobs))]
