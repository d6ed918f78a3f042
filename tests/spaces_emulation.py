"""A stand-in for Hugging Face's ``spaces`` package on a ZeroGPU Space, for tests: ``GPU`` wraps a function as
``spaces/zero/wrappers.py`` (spaces 0.51.3) does, step for step, less the GPU scheduling and the torch patching:

- each call takes the idle worker if there is one (one GPU index here), else forks a new one from a ``fork``
  multiprocessing context (the app's process as it is at that moment: models, threads' objects, locks);
- the arguments are pickled to the worker through a ``SimpleQueue`` (a PicklingError raised at the caller);
- in the worker (its module flag ``forked`` set, so a decorated call made there runs inline) the function runs in a
  thread pool thread; each value is pickled back through another ``SimpleQueue``, then an end marker;
- for a generator, the caller's ``close()`` at a yield sets the worker's stop event, which the worker reads after
  the function's next value, closing it; the caller's close then waits for the worker's end marker.

Unlike the real one, every wait is bounded (``TIMEOUT_S``) so that a worker that hangs fails a test instead of
hanging it, and ``shutdown()`` ends the workers a test forked.
"""

from __future__ import annotations

import inspect
import multiprocessing
import queue
import traceback
from concurrent.futures import ThreadPoolExecutor
from functools import partial, wraps

import gradio as gr

CTX = multiprocessing.get_context("fork")
TIMEOUT_S = 10.0      # no answer from a worker in this long: it hangs (a decode here takes < 1 s)
forked = False
_idle: dict[int, "Worker"] = {}       # GPU index -> its idle worker (spaces' ``workers``)
_all: list["Worker"] = []


class Worker:
    def __init__(self, target):
        self.arg_queue, self.res_queue, self.stop_event = CTX.SimpleQueue(), CTX.SimpleQueue(), CTX.Event()
        self.process = CTX.Process(target=target, args=(self.arg_queue, self.res_queue, self.stop_event),
                                   daemon=True)
        self.process.start()
        _all.append(self)

    def get(self):
        """The worker's next message, within TIMEOUT_S; ("aborted",) if the worker died."""
        waited = 0.0
        while not self.res_queue._reader.poll(0.05):
            waited += 0.05
            if not self.process.is_alive() or waited > TIMEOUT_S:
                return ("aborted", "the worker died" if not self.process.is_alive() else "no answer in time")
        return self.res_queue.get()


def shutdown() -> None:
    for w in _all:
        if w.process.is_alive():
            w.process.kill()
        w.process.join(5)
    _all.clear()
    _idle.clear()


def _take(target) -> Worker:
    worker = _idle.pop(0, None)
    if worker is not None and worker.process.is_alive():
        return worker
    return Worker(target)


def _exception(e: BaseException) -> tuple:
    return ("exception", e.__class__.__name__, "".join(traceback.format_exception(type(e), e, e.__traceback__)))


def _raise(res: tuple):
    if res[0] == "aborted":
        raise gr.Error(f"ZeroGPU worker error: GPU task aborted ({res[1]})")
    raise gr.Error(f"ZeroGPU worker error: {res[1]}\n{res[2]}")


def GPU(task=None, *, duration=None, size=None):
    if task is None:
        return partial(GPU, duration=duration, size=size)
    return _generator_wrapper(task) if inspect.isgeneratorfunction(task) else _regular_wrapper(task)


def _worker_loop(arg_queue, stop_event, run) -> None:
    global forked
    forked = True
    while True:
        args, kwargs = arg_queue.get()
        stop_event.clear()
        with ThreadPoolExecutor() as executor:
            executor.submit(run, args, kwargs).result()


def _regular_wrapper(task):
    def target(arg_queue, res_queue, stop_event):
        def run(args, kwargs):
            try:
                res = ("ok", task(*args, **kwargs))
            except Exception as e:
                res = _exception(e)
            res_queue.put(res)
        _worker_loop(arg_queue, stop_event, run)

    @wraps(task)
    def handler(*args, **kwargs):
        if forked:
            return task(*args, **kwargs)
        worker = _take(target)
        worker.arg_queue.put((args, kwargs))
        res = worker.get()
        if res[0] != "ok":
            _raise(res)
        _idle[0] = worker
        return res[1]
    return handler


def _generator_wrapper(task):
    def target(arg_queue, res_queue, stop_event):
        def run(args, kwargs):
            gen = task(*args, **kwargs)
            while True:
                try:
                    res = next(gen)
                except StopIteration:
                    break
                except Exception as e:
                    res_queue.put(_exception(e))
                    break
                if stop_event.is_set():
                    gen.close()
                    break
                res_queue.put(("ok", res))
            res_queue.put(("end",))
        _worker_loop(arg_queue, stop_event, run)

    @wraps(task)
    def handler(*args, **kwargs):
        if forked:
            yield from task(*args, **kwargs)
            return
        worker = _take(target)
        worker.arg_queue.put((args, kwargs))
        yields: queue.Queue = queue.Queue()

        def fill():
            while True:
                res = worker.get()
                yields.put(res)
                if res[0] == "end":
                    _idle[0] = worker
                if res[0] != "ok":
                    return
        with ThreadPoolExecutor(1) as executor:
            executor.submit(fill)
            while True:
                res = yields.get(timeout=TIMEOUT_S + 5)     # ``fill`` gives up first
                if res[0] == "end":
                    break
                if res[0] != "ok":
                    _raise(res)
                try:
                    yield res[1]
                except GeneratorExit:
                    worker.stop_event.set()
                    raise
    return handler
