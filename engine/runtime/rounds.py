"""One round of the engine loop run so that only the decode whose request fails fails (``run``).

``scheduler.run_round`` runs every request of a round together. If it raises, every request is put back as it was
before the round (``Saved``): its cache (``engine.runtime.cache.restore``: a slot cache's length, which moves only
once its forward succeeded; a ``DynamicCache``'s layers, cut back; the canvas encoder's cache that a ``Call``
extends) and its device generator's state (noise the round drew before it raised is drawn again, the same, so a
retried decode's seeded tokens equal an unfailed one's). The failed attempt's frames are cleared before anything
runs again (``released``): its tensors go, while its traceback's lines stay for the log. Then:

- **out of device memory** (``torch.OutOfMemoryError``, a CUDA or other accelerator allocation): the device's cached
  blocks are released and the round runs again in two halves, each split again while it runs out, down to a request
  alone, which then fails with a one-line message (the decode is too big for the device even alone; the rest of its
  round go on). A batch that fits at half its size costs two forwards, not a failure of everyone in it;
- **any other error**: each request alone, so a bad request fails its own decode with its own message.

Neither is silent: the caller's ``retries`` (``EngineLoop.retries``) counts the rounds of several requests run again
("out of memory": in halves; "raised": one by one) and the requests whose decode ends with the error ("failed"),
and each is logged with the error's type and message.
"""

from __future__ import annotations

import logging
import traceback
from collections import Counter
from dataclasses import dataclass

import torch

from engine.errors import UserError
from engine.runtime import scheduler
from engine.runtime.cache import cache_lengths, restore, round_cache

log = logging.getLogger(__name__)

TOO_BIG = ("out of device memory: this decode does not fit even alone in a round (the others in it went on): try a "
           "shorter prompt, fewer new tokens or a smaller block")


@dataclass
class Failed:
    """A request's place in a round's results when its decode is to fail with ``error``."""
    error: Exception


@dataclass
class Saved:
    """What a round that raised may have changed of a request, as it was before the round."""
    cache: object                           # the cache the round may grow (``engine.runtime.cache.round_cache``)
    lengths: list | int | None              # what it holds (``cache_lengths``)
    rng: torch.Tensor | None                # the device generator's state (a few KB on a CPU, 16 bytes on CUDA)

    @classmethod
    def of(cls, req) -> "Saved":
        cache, sampling = round_cache(req), getattr(req, "sampling", None)
        return cls(cache, cache_lengths(cache), sampling.generator.get_state() if sampling is not None else None)

    def rewind(self, req) -> None:
        restore(self.cache, self.lengths)
        if self.rng is not None:
            req.sampling.generator.set_state(self.rng)


def run(reqs: list, retries: Counter | None = None) -> list:
    """Every request's result (as ``scheduler.run_round``), or ``Failed`` for those that cannot run. ``retries``
    counts the rounds that raised (the module's docstring)."""
    retries = Counter() if retries is None else retries
    saved = [Saved.of(r) for r in reqs]
    try:
        return scheduler.run_round(reqs)
    except Exception as e:
        error = released(e)
    for r, s in zip(reqs, saved):
        s.rewind(r)
    what = f"{type(error).__name__}: {' '.join(str(error).split())[:300]}"
    if isinstance(error, torch.OutOfMemoryError):
        del error                                    # nothing of the failed attempt is kept through the retry
        free_device_memory()
        if len(reqs) == 1:
            retries["failed"] += 1
            log.warning("a decode alone ran out of device memory and fails (%s)", what)
            return [Failed(UserError(TOO_BIG))]
        retries["out of memory"] += 1
        log.warning("a round of %d requests ran out of device memory; it runs again in halves (%s)", len(reqs), what)
        half = len(reqs) // 2
        return run(reqs[:half], retries) + run(reqs[half:], retries)
    if len(reqs) == 1:
        retries["failed"] += 1
        log.warning("a decode's request raised; the decode fails (%s)", what)
        return [Failed(error)]
    retries["raised"] += 1
    log.warning("a round of %d requests raised; each runs again alone (%s)", len(reqs), what)
    return [x for r in reqs for x in run([r], retries)]


def released(error: BaseException) -> BaseException:
    """``error`` with the local variables of its traceback's frames, and of the exceptions chained to it, cleared:
    the tensors a failed attempt held in them (a forward's activations, logits) are freed before the retry, while
    the traceback still names every line for the log."""
    seen, stack = set(), [error]
    while stack:
        e = stack.pop()
        if e is not None and id(e) not in seen:
            seen.add(id(e))
            traceback.clear_frames(e.__traceback__)
            stack += [e.__cause__, e.__context__]
    return error


def free_device_memory() -> None:
    """The blocks the caching allocator holds but no tensor uses go back to the device before the retry."""
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
