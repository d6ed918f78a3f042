"""The service's model work in a worker forked per GPU lease (Hugging Face ZeroGPU, ``spaces.GPU``).

On ZeroGPU a decorated function does not run in the app's process: ``spaces`` (``spaces/zero/wrappers.py``) forks
a worker (a ``fork`` multiprocessing context) or reuses an idle one, pickles the arguments to it through a queue,
runs the function there, pickles each yielded value back, and when the caller closes the generator sets a stop
event that the worker reads after the function's next value. ``leased(gpu)`` gives a ``DecodeService`` whose model
entry points (``RELAYED``) go that way; nothing else of the service changes. How each crossing is made:

- the service crosses by key: the worker was forked after the service was made, so it already holds it (and its
  models) in ``_SERVICES``; only the key, the method's name and its plain arguments are pickled;
- callables do not cross: ``should_stop`` stays with the caller, asked at each value that comes back; a sweep's
  ``progress`` comes back as a value; a ``UserError`` comes back as its message (spaces would show only its class);
- the worker yields a heartbeat (None) every ``HEARTBEAT_S`` while the decode has nothing new, so the spaces
  wrapper reads its stop event that often: a caller who leaves ends the worker's decode within about that;
- per value only the newest snapshot crosses (a partial trace, or a sweep's rows so far); the ones the queue had
  no time for are dropped, as ``explorer.page.worker.follow`` drops those the page had no time for;
- the engine time the worker's loop charges the call's ``client`` comes back before each value and at the end
  (("charge", seconds)), and the caller charges it to its own ledger: the one the page's gate orders by
  (``explorer.page.fair``), which would otherwise see only the page's drawing.

The engine loop (``engine.runtime.jobs``) and the service's model lock are made anew in a forked child.
"""

from __future__ import annotations

import inspect
import itertools
import os
import threading
import time
from typing import Callable, Iterator

from engine.errors import UserError
from engine.harness.service import DecodeService
from engine.runtime.jobs import engine_loop
from engine.runtime.ledger import path_of

HEARTBEAT_S = 0.2
LEASE_GRACE_S = 5.0      # a lease's time past the request's budget (UNMASK_MAX_SECONDS) before it counts as hung
RELAYED = ("stream", "branch_stream", "branch_from", "sweep_stream")
_SERVICES: dict[int, DecodeService] = {}
_KEYS = itertools.count()
_local = threading.local()


def in_worker(key: int, method: str, args: tuple, kwargs: dict) -> Iterator:
    """What runs in the leased worker (the function ``spaces.GPU`` decorates): ``method`` of the service, run in a
    thread so that this generator can yield heartbeats while the decode has nothing new. Yields None (a heartbeat),
    ("value", v), ("progress", (done, total)), ("charge", seconds) or ("error", message); closing it aborts the
    decode and waits for it to end."""
    service, stop, cond = _SERVICES[key], threading.Event(), threading.Condition()
    client = kwargs.get("client", "")
    forked = os.getpid() != service.pid     # else the caller's ledger is this one: charged already
    owed = _charges(client) if forked else (lambda: 0.0)
    box = {"value": None, "fresh": False, "progress": None, "ended": False, "error": None, "raised": None}

    def progress(done, total):
        with cond:
            box["progress"] = (done, total)
            cond.notify()

    def run():
        _local.in_lease = True       # the service's own calls between its methods stay in this worker
        extra = {"progress": progress} if method == "sweep_stream" else {}
        gen = iter(())
        try:
            gen = getattr(DecodeService, method)(service, *args, should_stop=stop.is_set, **kwargs, **extra)
            for value in gen:
                with cond:
                    box.update(value=value, fresh=True)
                    cond.notify()
        except UserError as e:
            box["error"] = str(e)
        except BaseException as e:     # raised in the worker: spaces reports it (a bug, not the visitor's)
            box["raised"] = e
        finally:
            gen.close()
            with cond:
                box["ended"] = True
                cond.notify()

    worker = threading.Thread(target=run, name="unmask-lease", daemon=True)
    worker.start()
    try:
        yield from _relay_box(box, cond, owed)
    finally:
        stop.set()
        worker.join()
        if forked:
            engine_loop().ledger.leave(client)


def _charges(client) -> Callable[[], float]:
    """The engine seconds this worker's ledger has charged ``client`` since last asked. Its accounts are held
    active (``Ledger.enter``) until the lease ends, so the charges of the decode's last rounds are not forgotten
    when the decode leaves."""
    ledger, path = engine_loop().ledger, path_of(client)
    ledger.enter(client)
    with ledger.lock:
        sent = [ledger.service[path]]

    def owed() -> float:
        with ledger.lock:
            now = ledger.service.get(path, sent[0])
        seconds, sent[0] = now - sent[0], now
        return seconds
    return owed


def _relay_box(box: dict, cond: threading.Condition, owed: Callable[[], float]) -> Iterator:
    while True:
        with cond:
            if not (box["fresh"] or box["progress"] or box["ended"]):
                cond.wait(HEARTBEAT_S)
            fresh, value, done = box["fresh"], box["value"], box["progress"]
            ended, error = box["ended"] and not fresh, box["error"]
            box.update(fresh=False, progress=None)
        if done is not None:
            yield "progress", done
        if (fresh or ended) and (seconds := owed()):
            yield "charge", seconds
        if fresh:
            yield "value", value
        elif ended:
            if box["raised"] is not None:
                raise box["raised"]
            if error is not None:
                yield "error", error
            return
        elif done is None:
            yield None


def leased(gpu: Callable) -> type:
    """A ``DecodeService`` class whose ``RELAYED`` entry points run through ``gpu(in_worker)`` (``spaces.GPU``
    with its duration), each call in its own lease."""
    remote = gpu(in_worker)

    class LeasedService(DecodeService):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.key, self.pid = next(_KEYS), os.getpid()
            _SERVICES[self.key] = self

        def _leased(self, method: str, args: tuple, kwargs: dict) -> Iterator:
            """The method's values as the worker sends them; ``should_stop()`` true, or closing this, ends the
            lease (the wrapper's close sets its stop event) once the worker's decode has stopped. Called in a
            lease (``branch_stream`` calls ``branch_from``), the method itself."""
            real = getattr(DecodeService, method)
            if getattr(_local, "in_lease", False):
                yield from real(self, *args, **kwargs)
                return
            named = inspect.signature(real).bind(self, *args, **kwargs).arguments   # a bad call raises here
            named.pop("self")
            should_stop, progress = named.pop("should_stop", None), named.pop("progress", None)
            gen = remote(self.key, method, (), named)
            deadline = time.monotonic() + self.max_seconds + LEASE_GRACE_S
            try:
                for item in gen:
                    if should_stop is not None and should_stop():
                        return
                    if time.monotonic() > deadline:     # the worker's decode is bounded by max_seconds: it hangs
                        raise TimeoutError(f"the GPU worker's {method} outlived its time budget")
                    if item is None:
                        continue
                    kind, value = item
                    if kind == "error":
                        raise UserError(value)
                    if kind == "charge":
                        self.ledger.charge(named.get("client", ""), value)
                        continue
                    if kind == "progress":
                        if progress is not None:
                            progress(*value)
                        continue
                    yield value
            finally:
                gen.close()

    for name in RELAYED:
        def relay(self, *args, _name=name, **kwargs):
            yield from self._leased(_name, args, kwargs)
        relay.__name__, relay.__doc__ = name, getattr(DecodeService, name).__doc__
        setattr(LeasedService, name, relay)
    return LeasedService
