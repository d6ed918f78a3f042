"""One round of the engine loop run so that only the decode whose request fails fails (``run``).

``scheduler.run_round`` runs every request of a round together. If it raises, the requests run again with their
caches as they were before it (``engine.runtime.cache.restore``):

- **out of device memory** (``torch.OutOfMemoryError``, a CUDA or other accelerator allocation): the device's cached
  blocks are released and the round runs again in two halves, each split again while it runs out, down to a request
  alone, which then fails with a one-line message (the decode is too big for the device even alone; the rest of its
  round go on). A batch that fits at half its size costs two forwards, not a failure of everyone in it;
- **any other error**: each request alone, so a bad request fails its own decode with its own message.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.errors import UserError
from engine.runtime import scheduler
from engine.runtime.cache import cache_lengths, restore

TOO_BIG = ("out of device memory: this decode does not fit even alone in a round (the others in it went on): try a "
           "shorter prompt, fewer new tokens or a smaller block")


@dataclass
class Failed:
    """A request's place in a round's results when its decode is to fail with ``error``."""
    error: Exception


def run(reqs: list) -> list:
    """Every request's result (as ``scheduler.run_round``), or ``Failed`` for those that cannot run."""
    lengths = [cache_lengths(r) for r in reqs]
    try:
        return scheduler.run_round(reqs)
    except Exception as e:
        error = e
    for r, n in zip(reqs, lengths):
        restore(r, n)
    if isinstance(error, torch.OutOfMemoryError):
        free_device_memory()
        if len(reqs) == 1:
            return [Failed(UserError(TOO_BIG))]
        half = len(reqs) // 2
        return run(reqs[:half]) + run(reqs[half:])
    if len(reqs) == 1:
        return [Failed(error)]
    out = []
    for r in reqs:
        try:
            out.append(scheduler.run_round([r])[0])
        except Exception as e:
            out.append(Failed(e))
    return out


def free_device_memory() -> None:
    """The blocks the caching allocator holds but no tensor uses go back to the device before the retry."""
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
