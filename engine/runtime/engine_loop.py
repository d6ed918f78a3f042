"""The engine loop: one per process, alive as long as the process, on one engine thread (vLLM v1's scheduler is the
model: waiting and running queues, requests added and aborted between rounds, a token budget per round).

Every decode reaches a model through here: the page's runs, Compare, Branch, the Sweep, the ``decode`` API, the CLI's
``generate`` and ``bench``, the lm-eval model and the Ray workers all ``submit`` a ``Job`` and read its ``Handle``.

    submit(job) -> handle       the decode waits; between two rounds waiting decodes join and finished ones leave
    abort(handle)               the decode leaves before the next round; its place is free at once
    handle.items(should_stop)   what the decode streams (a snapshot after a forward, at most every ``every_s``)
    handle.result()             its final value (its trace), or its error

A round takes one request from every running decode (``run_round``: one batched forward per model, one batched
statistics call per sampling setting); then each decode's rule runs to its next request, and what the rules ask to
read of the device (``engine.runtime.device.Read``) is read for all of them in one copy (``_reads``). The places and
the rows are shared by measured cost (``engine.runtime.share``): each flow (a client's path of accounts,
``Job.client``: the page's pool, client and session; the process itself is "") accrues the engine time its decodes
took (``engine.runtime.ledger``); a free place goes to the least served flow's decode, and when the set is full a
decode of a flow served more than a waiting one pauses at the round boundary, kept whole, until it is the least
served again. A ``Group`` caps its own jobs running at once (a bench's ``--batch``). A round's queries are bounded
by ``round_tokens`` (always at least one request), taken in rotating order, so one huge prompt cannot starve the
rest; when several flows run, the flows far ahead of the least served sit a round out. Device memory is the byte
ledger's (``engine.models.memory``): a decode is seated, and a round's rows taken, only while they fit its budget
(``share.fits``, ``share.within_budget``; the round's bytes are its ``round`` account while it runs); seating
stops at the least served decode that does not fit, though a smaller one behind it would (it would otherwise
starve behind a stream of small ones), and a cut round's rows rotate as its tokens do. A job's
``budget_s`` is wall time from its submission: past it the decode is stopped at the next round boundary with its
last state.

A decode's tokens never depend on its company: it has its own random generator, its rows' statistics are computed
row by row, and the batched forward gives each decode its own logits (``engine.runtime.batch``; the last float bits
of a projection may differ with the batch, never a token). A forward that raises is retried request by request, so
the decode that caused it fails alone with its message and the others go on; one out of device memory is retried in
halves (``engine.runtime.rounds``), each request rewound first (its cache, its generator); ``retries`` counts such
rounds, and each is logged. A round that raises in the loop itself (a bug) fails every decode the loop holds,
waiting ones included, and is logged; the loop then sleeps until new work comes. No decode's failure ends the
engine thread, and it ends before the interpreter does (``engine.runtime.lifecycle``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Callable, Generator

from engine.runtime import rounds
from engine.runtime import share as fair_share
from engine.runtime.device import Read, read_back
from engine.runtime.lifecycle import Aborted, EngineThread, close
from engine.models.memory import LEDGER
from engine.runtime.scheduler import Call, Forward
from engine.runtime.ledger import Ledger
from engine.runtime.share import client_of

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Group:
    """A caller's own cap on its jobs running at once, and the order in which they ended (``Scheduler``)."""
    limit: int
    running: int = 0
    ended: deque = field(default_factory=deque)


@dataclass(eq=False)
class Job:
    start: Callable[[], Generator]          # the decode: yields requests (and items to stream), returns its result
    client: str | tuple = ""                # its flow: the accounts its engine time is charged to (``ledger``)
    group: Group | None = None
    budget_s: float | None = None           # wall seconds from submission
    snapshot: Callable[[], object] | None = None   # the decode's state to stream (called on the engine thread)
    every_s: float = 0.0                    # at most one snapshot per every_s (0: after every forward)
    first_at_once: bool = True              # the first snapshot after the first forward (else after every_s)
    on_limit: Callable[[str], object] | None = None   # the final value of a decode stopped by its budget
    index: int = 0                          # the caller's number for it (``Scheduler``)
    need: int = 0                           # device bytes it needs at once (``memory.decode_need``; 0: unknown)


class Handle:
    """One submitted decode, read from any thread: the items it streams, then its result or its error."""

    def __init__(self, job: Job, loop: "EngineLoop"):
        self.job, self.loop = job, loop
        self.submitted = time.monotonic()
        self.seconds = 0.0                  # its share of the rounds it took part in
        self.rounds, self.peers = 0, 0      # the rounds it took part in, and the decodes in them summed
        self.limit: str | None = None       # the limit that stopped it early
        self.admitted = False               # it has joined the running set (its group counts it)
        self.value, self.error = None, None
        self._items: deque = deque()
        self._done = threading.Event()
        self._cond = threading.Condition()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def put(self, item) -> None:
        with self._cond:
            self._items.append(item)
            self._cond.notify_all()

    def finish(self, value=None, error: BaseException | None = None) -> None:
        with self._cond:
            if self._done.is_set():
                return
            self.value, self.error = value, error
            self._done.set()
            self._cond.notify_all()
        if self.loop is not None:
            self.loop.ledger.leave(self.job.client)     # once: its flow's accounts are forgotten when idle
        if self.job.group is not None:
            with self.loop.cond:
                self.job.group.ended.append(self)
                self.loop.cond.notify_all()

    def items(self, should_stop: Callable[[], bool] | None = None, poll_s: float = 0.05):
        """Each streamed item as it comes, until the decode ends; ``should_stop()`` true aborts it (asked before
        each item too: a reader kept busy by a stream of items still stops at once)."""
        stopped = lambda: should_stop is not None and should_stop()  # noqa: E731
        while True:
            with self._cond:
                while not self._items and not self._done.is_set() and not stopped():
                    self._cond.wait(poll_s)
                if stopped():
                    self.loop.abort(self)
                    return
                if not self._items:
                    return
                item = self._items.popleft()
            yield item

    def result(self, timeout: float | None = None):
        """The decode's final value; its error raised here."""
        if not self._done.wait(timeout):
            raise TimeoutError("the decode has not finished")
        if self.error is not None:
            raise self.error
        return self.value


@dataclass(eq=False)
class _Running:
    handle: Handle
    decode: Generator
    request: object = None
    last_snapshot: float = float("-inf")
    tenure: float = 0.0                     # engine seconds charged since it last took a place (``share``)


class EngineLoop(EngineThread):
    """See the module's docstring. ``max_running``: decodes that share a round; ``round_tokens``: query tokens in
    one round (at least one request runs whatever its size)."""

    def __init__(self, max_running: int = 8, round_tokens: int = 4096, ledger: Ledger | None = None):
        self.max_running, self.round_tokens = max(1, max_running), max(1, round_tokens)
        self.ledger = Ledger() if ledger is None else ledger     # each flow's measured service
        self.cond = threading.Condition()
        self.queues: dict[str, deque[Handle]] = {}  # client -> its waiting decodes, oldest first
        self.running: list[_Running] = []
        self.paused: list[_Running] = []            # preempted decodes, oldest first: generator and request kept
        self.rounds = 0
        self.retries: Counter = Counter()          # rounds that raised and ran again, decodes they failed (rounds.run)
        self._aborts: set[Handle] = set()
        self._rotate = 0
        self.round_bytes = 0                        # the running round's logits and statistics (the byte ledger)
        self.round_reserve = 0                      # its statistics' temporaries (``share.within_budget``)
        LEDGER.track("round", self, lambda loop: loop.round_bytes)
        self._start()

    # -- the callers' side ---------------------------------------------------------------------------------------
    def submit(self, job: Job) -> Handle:
        return self.submit_many([job])[0]

    def submit_many(self, jobs: list[Job]) -> list[Handle]:
        """Jobs that wait together: none of them joins a round before all are queued (a caller's run is then
        the same to the bit however often it is repeated, when it runs alone)."""
        handles = [Handle(j, self) for j in jobs]
        with self.cond:
            for h in handles:
                self.ledger.enter(h.job.client)
                self.queues.setdefault(h.job.client, deque()).append(h)
            self.cond.notify_all()
        for h in handles if self._stopping else ():     # no thread will serve them: they end now, not never
            self.abort(h)
        return handles

    def abort(self, handle: Handle) -> None:
        if handle.done:
            return
        with self.cond:
            queue = self.queues.get(handle.job.client, ())
            if handle in queue:
                queue.remove(handle)
                handle.finish(error=Aborted("aborted before it started"))
            else:
                self._aborts.add(handle)
                self.cond.notify_all()

    @property
    def waiting(self) -> list[Handle]:
        """Every waiting decode, client by client."""
        return [h for q in self.queues.values() for h in q]

    def on_engine_thread(self) -> bool:
        return threading.current_thread() is self.thread

    # -- the engine thread (its life: ``engine.runtime.lifecycle``) ---------------------------------------------
    def _step(self) -> None:
        """Between rounds: aborts and budgets, the fair share's pauses, admissions; then one round, then each
        decode's rule. The step's span (admissions, forward and rules) is split equally among the decodes of its
        round (``Handle.seconds``); the fair share charges each its measured cost (``share.charge``)."""
        t0 = time.perf_counter()
        self._leave()
        fair_share.preempt(self)
        own: dict[int, float] = {}                    # each decode's own time outside the round (start, rule)
        for handle in self._admit():
            if isinstance(handle, _Running):          # a paused decode resumes where it stopped
                handle.tenure = 0.0
                self.running.append(handle)
                continue
            t = time.perf_counter()
            r = _Running(handle, None, last_snapshot=float("-inf") if handle.job.first_at_once else time.monotonic())
            try:
                r.decode = handle.job.start()
            except Exception as e:
                self._finish(handle, error=e)
                continue
            if r.decode is not None and self._advance(r, None):
                self.running.append(r)
            own[id(r)] = time.perf_counter() - t
        self._reads(self.running)
        if not self.running:
            return
        chosen = self._chosen()
        cost = [len(r.request.ids) if isinstance(r.request, Forward) else 0 for r in chosen]
        t = time.perf_counter()
        LEDGER.note()                                 # the peak: every account with this round's bytes
        results = rounds.run([r.request for r in chosen], self.retries)
        self.round_bytes = 0
        round_s = time.perf_counter() - t
        self.rounds += 1
        for r in chosen:            # counted before its rule runs: a decode that ends here is read at once
            r.handle.rounds, r.handle.peers = r.handle.rounds + 1, r.handle.peers + len(chosen)
        for r, res in zip(chosen, results):
            t = time.perf_counter()
            if isinstance(res, rounds.Failed):
                self._end(r, error=res.error)
            elif not self._advance(r, res):
                self.running.remove(r)
            own[id(r)] = own.get(id(r), 0.0) + time.perf_counter() - t
        self._reads(chosen)
        fair_share.charge(self, chosen, cost, round_s, own)
        share = (time.perf_counter() - t0) / len(chosen)
        for r in chosen:
            r.handle.seconds += share

    def _leave(self) -> None:
        """Aborted decodes and decodes past their budget leave the running set."""
        with self.cond:
            aborts, self._aborts = self._aborts, set()
        now = time.monotonic()
        for r in self.running + self.paused:
            job = r.handle.job
            if r.handle in aborts:
                self._end(r, error=Aborted("aborted"))
            elif job.budget_s is not None and now - r.handle.submitted > job.budget_s:
                self._over_budget(r)

    def _over_budget(self, r: _Running) -> None:
        self._unlist(r)
        close(r.decode)
        self._stop(r.handle)

    def _unlist(self, r: _Running) -> None:
        for where in (self.running, self.paused):
            if r in where:
                where.remove(r)

    def _stop(self, h: Handle) -> None:
        """End a decode that ran out of its budget with its last state (``on_limit``), or a ``TimeoutError``."""
        job = h.job
        why = (f"stopped after {now_s(h):.1f} s, to end within the time budget of {job.budget_s:g} s per request "
               "(UNMASK_MAX_SECONDS)")
        h.limit = why
        if job.on_limit is None:
            self._finish(h, error=TimeoutError(why))
        else:
            self._finish(h, value=job.on_limit(why))

    def _admit(self) -> list[Handle]:
        """Waiting decodes that join now: the least served flow's first (``share.candidates``: its paused decode,
        else its oldest waiting one its group allows), one at a time, each seat counted as a turn of its flow. A
        decode whose budget ran out while it waited ends here, with nothing decoded."""
        out = []
        with self.cond:
            now = time.monotonic()
            late = [h for q in self.queues.values() for h in q
                    if h.job.budget_s is not None and now - h.submitted > h.job.budget_s]
            for h in late:
                self.queues[h.job.client].remove(h)
        for h in late:
            self._stop(h)
        with self.cond:
            while len(self.running) + len(out) < self.max_running:
                fits = fair_share.candidates(self)
                if not fits:
                    break
                h = min(fits, key=lambda h: self.ledger.key(client_of(h)))
                if not isinstance(h, _Running) and not fair_share.fits(self, h, out):
                    if h.done:
                        continue                # refused: the next candidate
                    break                       # it waits until decodes end and their memory is free
                self.ledger.seated(client_of(h))
                out.append(h)
                if isinstance(h, _Running):
                    self.paused.remove(h)
                    continue
                self.queues[h.job.client].remove(h)
                if h.job.group is not None:
                    h.job.group.running += 1
                h.admitted = True
            # forget the flows with nothing waiting (a public server meets many addresses)
            self.queues = {c: q for c, q in self.queues.items() if q}
        return out

    def _chosen(self) -> list[_Running]:
        """The decodes whose requests run this round: all, unless their queries pass ``round_tokens``; then as
        many as fit, starting where the last cut round stopped. Several flows: ``share.rows``."""
        cost = [len(r.request.ids) if isinstance(r.request, Forward) else 0 for r in self.running]
        if len({client_of(r) for r in self.running}) > 1:
            return fair_share.within_budget(self, fair_share.rows(self, cost))
        if sum(cost) <= self.round_tokens:
            return fair_share.within_budget(self, list(self.running))
        n = len(self.running)
        chosen, used = [], 0
        for i in [(self._rotate + k) % n for k in range(n)]:
            if not chosen or used + cost[i] <= self.round_tokens:
                chosen.append(i)
                used += cost[i]
        self._rotate = (self._rotate + 1) % n
        keep = {id(r) for r in fair_share.within_budget(self, [self.running[i] for i in chosen])}  # cut rotated too
        return [self.running[i] for i in sorted(chosen) if id(self.running[i]) in keep]

    def _advance(self, r: _Running, result) -> bool:
        """Send the decode its result and run its rule to its next request, streaming what it yields on the way;
        False once it has ended."""
        job = r.handle.job
        try:
            while True:
                item = r.decode.send(result)
                result = None
                if isinstance(item, (Forward, Call, Read)):
                    r.request = item
                    return True
                now = time.monotonic()
                if job.snapshot is not None and now - r.last_snapshot >= job.every_s:
                    r.last_snapshot = now
                    r.handle.put(job.snapshot())
        except StopIteration as e:
            self._finish(r.handle, value=e.value)
        except Exception as e:
            self._finish(r.handle, error=e)
        return False

    def _reads(self, decodes: list[_Running]) -> None:
        """The rules' ``Read`` requests of these decodes, in one copy from the device for all of them (a sync that
        does not grow with the round), each rule run on to its next request; again while any asks once more."""
        while pending := [r for r in decodes if r in self.running and isinstance(r.request, Read)]:
            values = read_back([r.request.tensors for r in pending])
            for r, v in zip(pending, values):
                if not self._advance(r, v):
                    self.running.remove(r)

    def _end(self, r: _Running, error: BaseException) -> None:
        self._unlist(r)
        close(r.decode)
        self._finish(r.handle, error=error)

    def _finish(self, handle: Handle, value=None, error=None) -> None:
        if handle.job.group is not None and handle.admitted and not handle.done:
            with self.cond:
                handle.job.group.running -= 1
        handle.finish(value, error)


def now_s(h: Handle) -> float:
    return time.monotonic() - h.submitted

