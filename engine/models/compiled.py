"""A compiled forward (``torch.compile``, inductor) for the static path's shape buckets: ``UNMASK_COMPILE``.

    comp = Compiled.of(adapter)          # None where compilation is off for this model (``decide``)
    model, how = comp.model_for(key)     # the callable to run a bucket's forward with, and its name in the trace

Where it applies: the static path (``engine.models.static``), whose forwards run at a few padded shapes, each
compiled once with static shapes (``dynamic=False``: a round of a new size meets a bucket, never a recompile;
``tools.experiments.compiled`` measures dynamic shapes against this). On a CPU, compilation brings the static path
with it where ``UNMASK_STATIC`` is ``auto``; ``UNMASK_STATIC=off`` keeps today's eager path and compiles nothing.

A visitor never waits for the compiler. The first forward of a bucket queues that bucket's compile on one
background thread and runs eagerly; the thread compiles on a copy of that forward's inputs (a cached forward's
K/V writes go to the slot pool's pad row, which no query reads) and marks the bucket ready. A ready bucket runs
the compiled code under dynamo's run-only mode, which never compiles: should a guard fail after all, that forward
runs eagerly instead of compiling on the engine's thread. At most ``MAX_SHAPES`` buckets are compiled per model
(later ones stay eager); ``graphs()`` counts what dynamo compiled, so a test can see that rounds do not recompile.
A bucket whose compile converts no frame at all is compiled too: dynamo's code for another model of the same shapes
serves it (``frames()``). A bucket is keyed by its shapes (a slot pool's capacity among them, never the pool), so a
new pool of a compiled capacity runs compiled from its first forward. A compile runs holding ``DEVICE_WORK``; the
static path captures a CUDA graph only when it takes that lock without waiting (``exclusive``), since CUDA refuses
another thread's work during a capture in the default global mode: while a compile runs, a new bucket's rounds run
without a graph.

Where the compiler is missing (no C++ compiler for inductor's CPU kernels: ``CXX`` or ``g++`` not found) or a
compile fails, the model falls back to eager for good, with one log line naming why.

``auto`` (the default) compiles where both were measured (``AUTO``): exactness (the golden decodes of
tests/golden.py through the compiled forward, token for token, records within 1e-4: ``EXACT``) and speed against
the eager path it replaces. Today that is nowhere: in fp32 on a CPU the compiled forward is exact for ``sdar`` and
``Dream`` but the static path it compiles is slower there than today's ragged eager path; in bf16 on a GPU
compilation changed the argmax of 2-6 % of rows (issue 69). So compiling is a mode a person chooses (``on``).
"""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import sys
import threading
import time

import torch

from engine.settings import get

MAX_SHAPES = 16
DYNAMIC = False
# held while a compile runs: a CUDA graph capture (engine.models.static) never overlaps it, since CUDA refuses work
# on another thread during a capture in the default global mode; the capture skips a round rather than wait
DEVICE_WORK = threading.Lock()
# (device type, dtype) -> the families whose golden decodes the compiled forward reproduced there, token for token
# with records within 1e-4 (tools.experiments.compiled exact; docs/results.md)
EXACT = {("cpu", torch.float32): frozenset({"sdar", "Dream"})}
# where ``auto`` compiles: exact there, and measured faster than the eager path it replaces. Empty: on a 2-core CPU
# the compiled static path is exact but slower than today's ragged eager path (docs/results.md)
AUTO: dict = {}


def log(line: str) -> None:
    print(f"unmask: {line}", file=sys.stderr, flush=True)


def decide(adapter) -> tuple[bool, str]:
    """(compile, why) for this model from ``UNMASK_COMPILE`` (and ``UNMASK_STATIC``, whose buckets it compiles)."""
    mode = get("UNMASK_COMPILE")
    if mode == "off":
        return False, "UNMASK_COMPILE=off"
    if get("UNMASK_STATIC") == "off":
        return False, "UNMASK_STATIC=off (compilation runs on the static path's buckets)"
    if getattr(adapter, "ragged", True) is False:
        return False, f"{getattr(adapter, 'model_type', '')}'s forwards do not run on the static path"
    if mode == "on":
        return True, "UNMASK_COMPILE=on"
    family = getattr(adapter, "model_type", "")
    where = (torch.device(adapter.device).type, getattr(adapter, "dtype", None))
    what = f"{family} in {str(where[1]).removeprefix('torch.')} on {where[0]}"
    if family in AUTO.get(where, ()):
        return True, f"auto: {what}, exact and faster compiled"
    if family in EXACT.get(where, ()):
        return False, f"auto: {what}, exact compiled but not faster than eager (UNMASK_COMPILE=on to compile)"
    return False, f"auto: {what} is not checked exact compiled (UNMASK_COMPILE=on to compile)"


def missing_compiler(device) -> str | None:
    """Why inductor cannot compile here (None: it can). Its CPU kernels are C++ built by ``CXX`` (default g++)."""
    if torch.device(device).type != "cpu":
        return None
    cxx = os.environ.get("CXX") or "g++"
    return None if shutil.which(cxx) else f"no C++ compiler ({cxx!r} not found)"


def label(adapter, paths: dict) -> str:
    """The trace's ``meta.compiled`` from its forwards' paths (``meta.forward_path``): "compiled" (every forward),
    "eager" (none; with why where the compiler is missing or failed), or how many of them ran compiled (the rest
    eagerly while their buckets compiled)."""
    done, total = sum(n for how, n in paths.items() if how.startswith("compiled")), sum(paths.values())
    if done and done == total:
        return "compiled"
    if done:
        return f"compiled {done} of {total} forwards"
    comp = adapter.__dict__.get("_compiled") if hasattr(adapter, "__dict__") else None
    return f"eager: {comp.failed}" if comp is not None and comp.failed else "eager"


def graphs() -> int:
    """Graphs dynamo has compiled in this process (every model together)."""
    from torch._dynamo.utils import counters
    return int(counters["stats"]["unique_graphs"])


def frames() -> int:
    """Frames dynamo was asked to convert in this process: a call its cached code serves converts none."""
    from torch._dynamo.utils import counters
    return int(counters["frames"]["total"])


class Compiled:
    """One model's compiled buckets and the thread that compiles them (``of``: one per adapter)."""

    def __init__(self, adapter):
        # the model's layers (its decoder), as the static path calls them: the output projection runs after
        self.adapter, self.model = adapter, adapter.model.get_decoder()
        self.fn = torch.compile(self.model, dynamic=DYNAMIC)
        self.run_only = torch._dynamo.run(self.model)          # cached compiled code or eager, never a compile
        self.ready: set = set()
        self.queued: set = set()
        self.done: set = set()           # queued buckets whose compile is over (ready, or declined by dynamo)
        self.seconds: dict = {}          # bucket key -> seconds its first compile took
        self.failed: str | None = missing_compiler(adapter.device)
        self.jobs: queue.Queue = queue.Queue()
        self.idle = threading.Event()
        self.idle.set()
        self.thread: threading.Thread | None = None
        if self.failed:
            log(f"compiled forward off for {adapter.name}, eager instead: {self.failed}")

    @classmethod
    def of(cls, adapter) -> "Compiled | None":
        on, why = decide(adapter)
        if not on:
            return None
        comp = adapter.__dict__.get("_compiled")
        if comp is None:
            comp = adapter.__dict__["_compiled"] = cls(adapter)
        return comp

    def settled(self, key) -> bool:
        """The bucket's compile is done (ready) or will never come (failed, or past the bound)."""
        return key in self.done or self.failed is not None or (key not in self.queued
                                                               and len(self.queued) >= MAX_SHAPES)

    def model_for(self, key):
        """The callable for a forward of bucket ``key`` and how it runs: compiled where ready, else eager (the
        first call of a bucket queues its compile on a copy of the call's inputs)."""
        if key in self.ready and self.failed is None:
            return self.run_only, "compiled"
        if self.failed is None and key not in self.queued and len(self.queued) < MAX_SHAPES:
            return (lambda **kw: self._queue(key, kw) or self.model(**kw)), "static eager (compiling)"
        return self.model, "static eager"

    def _queue(self, key, kw: dict) -> None:
        self.queued.add(key)
        self.idle.clear()
        self.jobs.put((key, warm_inputs(kw)))
        log(f"compiling {self.adapter.name}'s bucket {key[:2]} in the background (eager meanwhile)")
        if self.thread is None:
            self.thread = threading.Thread(target=self._work, name=f"compile {self.adapter.name}", daemon=True)
            self.thread.start()

    def _work(self) -> None:
        if hasattr(os, "setpriority"):        # the compiler (this thread, and the g++ it starts) yields the CPU to
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)      # the visitors' decodes
        # dynamo keeps compiled code per code object, which the models of one class (and transformers' wrappers of
        # every class) share; its config is per thread, so the bound is set here, where the compiles run
        torch._dynamo.config.recompile_limit = 4 * MAX_SHAPES
        while True:
            key, kw = self.jobs.get()
            if self.failed is None:
                t, before, seen = time.perf_counter(), graphs(), frames()
                try:
                    with torch.no_grad(), DEVICE_WORK:
                        self.fn(**kw)
                except Exception as e:     # noqa: BLE001 - any compiler failure means eager, and its log line says why
                    self.failed = f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"
                    log(f"compiled forward off for {self.adapter.name}, eager instead: the compile failed "
                        f"({self.failed})")
                else:
                    self.seconds[key] = time.perf_counter() - t
                    # compiled: a new graph, or no frame to convert at all (the code dynamo compiled for another
                    # model or slot pool of these shapes serves this one); else dynamo declined the frame
                    made = graphs() > before or frames() == seen
                    self.ready.update([key] if made else [])
                    log(f"compiled {self.adapter.name}'s bucket {key[:2]} in {self.seconds[key]:.1f} s "
                        f"({len(self.ready)} ready, {self.jobs.qsize()} queued)" if made else
                        f"compiled nothing for {self.adapter.name}'s bucket {key[:2]} (dynamo ran it eagerly): "
                        "it stays eager")
            self.done.add(key)
            if self.jobs.empty():
                self.idle.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every queued compile is done (benchmarks and tests; the engine never waits)."""
        return self.idle.wait(timeout)


@contextlib.contextmanager
def exclusive():
    """Yields whether this thread holds ``DEVICE_WORK`` (no compile running); never waits for a compile."""
    mine = DEVICE_WORK.acquire(blocking=False)
    try:
        yield mine
    finally:
        if mine:
            DEVICE_WORK.release()


def warm_inputs(kw: dict) -> dict:
    """A copy of a forward's inputs for the compile thread: tensors cloned; a slot cache's pool replaced by a
    private one of two rows of the same capacity (the compile writes nothing a decode reads, even if the real pool
    grows meanwhile and renumbers its rows). Its rows are marked dynamic, so one graph serves every pool size: a
    pool grows (a larger class) by new tensors of more rows, which must not recompile every bucket."""
    from engine.models import slots
    out = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
    for k, v in kw.items():
        if isinstance(v, slots.RoundSlots):
            pool = slots.SlotPool.__new__(slots.SlotPool)
            pool.__dict__.update(v.pool.__dict__, rows=1, free=[])
            pool.keys, pool.values = ([x.new_zeros((2,) + x.shape[1:]) for x in xs] for xs in (v.pool.keys,
                                                                                                  v.pool.values))
            for t in pool.keys + pool.values:
                torch._dynamo.mark_dynamic(t, 0)
            one = torch.ones_like(v.rows)
            out[k] = slots.RoundSlots(pool, one, torch.ones_like(v.w_row), v.w_slot.clone())
    return out
