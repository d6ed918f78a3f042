"""The byte ledger: every byte the engine keeps on a model's device, by named account and owner (vLLM's KV-cache
manager and its memory profiling are the model: one budget, counted before work starts, never discovered by an
out-of-memory error).

    LEDGER.track("pools", owner, measure)   an owner's bytes, ``measure(owner)`` read whenever the ledger is read;
                                            the entry goes with its owner (held by a weak reference only)
    LEDGER.used()                           every account together; ``accounts()`` by name

Accounts (``docs/architecture.md``, "The byte ledger"):

    pools     the static path's K/V slot pools (``engine.models.slots``), every row, free ones included
    graphs    captured CUDA graphs, sized at capture (``engine.models.static``)
    buckets   the static path's device buffers per shape bucket (idle no-cache buckets are freed)
    decodes   what each decode keeps on the device between its forwards (``Runner.kept``, ``Policy.kept``: a
              rule's previous distributions, a window of them) and its growing K/V cache
    round     the round running now: its logits and their statistics (``round_bytes``), while it runs

The budget is ``UNMASK_STATIC_MB`` (0: a quarter of a GPU's memory, ``device_total``, no bound on a CPU). Past it a
decode waits for a place (the engine loop's ``_admit``), a round takes fewer rows (``_chosen``), a pool does not
grow and a bucket is not captured (``engine.models.static``); a decode that alone cannot fit is refused with one
line.

No torch here: a tensor's size is read from its attributes (the engine loop imports this module).
"""

from __future__ import annotations

import threading
import weakref
from typing import Callable

from engine import settings

# (rows x V) elements per statistics call (``engine.runtime.sampling``), however large the round (a part larger than
# that runs by rows: ``by_rows``), so a round's float64 temporaries are bounded by this whatever its batch and
# canvas. On the CPU: 32 MiB per float64 temporary, glibc's largest mmap threshold, so a freed temporary's memory is
# reused instead of mapped and faulted in again (a batch-12 round at V = 126 464 took 1.5 s in 64 MiB chunks, 0.94 s
# in these). On an accelerator each chunk is a dozen kernel launches that the host waits for, and the caching
# allocator reuses memory: one chunk for a round of twelve 32-row decodes at that vocabulary (512 MiB per temporary;
# in 4M-element chunks that round's statistics took 5.7 ms of host time on an H200, against 0.65 ms for one decode)
CHUNK = 1 << 22
DEVICE_CHUNK = 1 << 26


def chunk_limit(device) -> int:
    """Elements per statistics call on ``device`` (``CHUNK`` on a CPU, ``DEVICE_CHUNK`` elsewhere)."""
    return CHUNK if str(device).split(":")[0] == "cpu" else DEVICE_CHUNK


# the float64 temporaries the statistics hold at once over one chunk (the logits' copy, the softmax, the filtered
# logits, the noise, its Gumbel transform: ``engine.runtime.sampling._stats``)
STATS_TEMPORARIES = 5


def storage_bytes(tensors) -> int:
    """The memory that ``tensors`` keep alive: each storage once (a view keeps its whole base), None skipped."""
    seen, total = set(), 0
    for t in tensors:
        if t is None or not hasattr(t, "untyped_storage"):
            continue
        s = t.untyped_storage()
        key = (str(t.device), s.data_ptr())
        if key not in seen:
            seen.add(key)
            total += s.nbytes()
    return total


def round_bytes(rows: int, kept_rows: int, vocab: int) -> int:
    """A request's device bytes while its round runs: its logits (float32, ``rows`` query rows) and the float64
    softmax of the ``kept_rows`` rows the statistics score (``stats_reserve``: their temporaries, once a round)."""
    return rows * vocab * 4 + kept_rows * vocab * 8


def stats_reserve(device, elements: int | None = None) -> int:
    """The statistics' float64 temporaries over one chunk, or over the round's ``elements`` (``scored_elements``)
    where they are fewer: what a round adds once, whatever its batch. A round of one 32-row decode at LLaDA's
    vocabulary sets aside 154 MiB, not the accelerator chunk's 2.5 GiB (which would leave a budget under that
    nothing, and a quarter of a 24 GB GPU's default budget 42 % less)."""
    chunk = chunk_limit(device)
    return STATS_TEMPORARIES * 8 * (chunk if elements is None else min(chunk, elements))


def scored_elements(requests) -> int:
    """The (rows x V) elements the statistics score over these requests: each ``Forward``'s scored rows by its
    vocabulary (a ``Call``, or a forward without statistics: none)."""
    return sum(rows_of(r.rows, len(r.ids)) * getattr(r.adapter, "vocab_size", 0)
               for r in requests if hasattr(r, "ids") and r.sampling is not None)


def decode_bytes(runner) -> int:
    """What a decode keeps on the device between its forwards (``engine.runtime.runner.Runner``): the logits its
    runner kept (``prefix``, ``later``), the result its rule may still hold (``held``), what its policy keeps
    (``Policy.kept``) and a growing K/V cache's tensors (a slot cache's row is the pools')."""
    kept = [runner.prefix[1], runner.later, *runner.held] + [t for o in runner.owners for t in o.kept()]
    caches = [getattr(c, "cache", c) for c in (runner.cache, getattr(runner, "full_cache", None))]
    layers = [x for c in caches for x in (getattr(c, "layers", None) or ())]
    return storage_bytes(kept + [t for x in layers for t in (x.keys, x.values)])


def rows_of(rows: slice, q: int) -> int:
    """How many of a forward's ``q`` rows a slice scores."""
    return len(range(*rows.indices(q)))


def request_bytes(req) -> int:
    """One request's share of its round (``round_bytes``): a ``Forward``'s logits and statistics (a ``Call`` runs
    alone: 0, its own model counts it)."""
    if not hasattr(req, "ids"):
        return 0
    q, a = len(req.ids), req.adapter
    V = getattr(a, "vocab_size", 0)          # a stand-in model without one (the tests' scripted ones) counts none
    return round_bytes(q, rows_of(req.rows, q) if req.sampling is not None else 0, V)


def kept_need(runner) -> int:
    """The most device bytes a decode keeps between its forwards, known before it starts: its rule's
    ``kept_estimate``, the result its rule holds where that outlives the step (the block's float32 logits and
    float64 softmax) and the logits kept for ``logits_of``. Its K/V cache: a slot cache's row is in the pools."""
    V, L, n = runner.adapter.vocab_size, runner.cfg.block_size, runner.end
    kept = sum(o.kept_estimate(runner, V) for o in runner.owners)
    kept += 0 if runner.step_scoped else L * V * (4 + 8)
    return kept + (n * V * 4 if runner.keeps_logits else 0)


def decode_need(runner) -> int:
    """The most device bytes one decode needs at once: ``kept_need`` and its largest request of a round (a
    full-attention forward runs the whole canvas; a block-causal one its block and at most a block of pending rows
    and the prompt). A round's statistics temporaries are ``stats_reserve``, once."""
    V, L, n = runner.adapter.vocab_size, runner.cfg.block_size, runner.end
    q = n if runner.adapter.attention == "full" else min(n, runner.P + 2 * L)
    return kept_need(runner) + round_bytes(q, L, V)


class Keeps:
    """A decoder's side of the ledger (``engine.runtime.loop.Policy`` inherits it): what its rule keeps on the
    device between forwards, and how long a forward's result lives."""
    step_scoped = False     # a forward's result dies with the rule's step (a method it returns from): the runner
    #                         stops counting it at the next request (``Runner.held``)
    keeps_logits = False    # reads earlier rows' logits across forwards (``Runner.logits_of``: Prophet)

    def attach(self, runner) -> None:
        """``runner``'s decode is this rule's: the ledger counts what ``kept`` holds with it."""
        runner.owners.append(self)
        runner.keeps_logits, runner.step_scoped = self.keeps_logits, self.step_scoped

    def kept(self) -> list:
        """The device tensors the rule keeps between forwards."""
        return []

    def kept_estimate(self, runner, vocab: int) -> int:
        """The most bytes ``kept`` will hold in this decode, known before it starts (``decode_need``)."""
        return 0

    def release(self) -> None:
        """The decode ended: let go of what ``kept`` holds."""


class MemoryLedger:
    """See the module's docstring. Read and written from the engine thread and the page's workers: every method
    holds ``lock``."""

    def __init__(self):
        self.lock = threading.RLock()
        self.entries: dict[str, dict[int, tuple]] = {}    # account -> id(owner) -> (weakref, measure)
        self.peak = 0
        self.device_total = 0         # a GPU's memory, set where a model runs on one (``engine.models.static``)

    def track(self, account: str, owner, measure: Callable[[object], int]) -> None:
        """Count ``measure(owner)`` bytes under ``account`` for as long as ``owner`` lives (or until ``forget``);
        ``measure`` is handed the owner, so the ledger never keeps it alive."""
        key = id(owner)
        with self.lock:
            entries = self.entries.setdefault(account, {})
            entries[key] = (weakref.ref(owner, lambda _, a=account, k=key: self._drop(a, k)), measure)
        self.note()

    def forget(self, account: str, owner) -> None:
        self._drop(account, id(owner))

    def _drop(self, account: str, key: int) -> None:
        with self.lock:
            self.entries.get(account, {}).pop(key, None)

    def accounts(self) -> dict[str, int]:
        """Bytes per account, each read now."""
        with self.lock:
            items = [(a, list(e.values())) for a, e in self.entries.items()]
        return {a: sum(m(o) for ref, m in e if (o := ref()) is not None) for a, e in items}

    def owned(self, account: str, owner) -> int:
        """One owner's bytes under ``account`` (0 when it has none)."""
        with self.lock:
            entry = self.entries.get(account, {}).get(id(owner))
        return entry[1](owner) if entry is not None and entry[0]() is owner else 0

    def used(self) -> int:
        return sum(self.accounts().values())

    def budget(self) -> float:
        """``UNMASK_STATIC_MB`` in bytes; 0: a quarter of the GPU's memory, unbounded where none is known (a CPU)."""
        mb = settings.get("UNMASK_STATIC_MB")
        if mb > 0:
            return mb * 2 ** 20
        return self.device_total / 4 if self.device_total else float("inf")

    def left(self) -> float:
        return self.budget() - self.used()

    def note(self) -> int:
        """Read every account; the highest total read so far is ``peak``."""
        used = self.used()
        self.peak = max(self.peak, used)
        return used


LEDGER = MemoryLedger()
