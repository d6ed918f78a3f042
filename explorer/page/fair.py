"""Fair queueing of the one model among the visitors of a public Space, by measured cost: it orders requests, and
refuses none while the model has a place free or the queue has room (work-conserving, as Linux's fq and DRR
schedulers, vLLM's and SGLang's priority queues and gradio's own queue).

Every request that runs the model (a run of the page, a link, Compare, Branch, Sweep, the ``decode`` API) passes the
gate. Each names its flow: its **pool** (an IPv4 /24 or IPv6 /32, ``proxy.pool_of``), its **client** (an address,
``explorer.page.proxy``) and its **session**; the engine loop charges each of them the engine time its decodes take
(``engine.runtime.ledger``, shared with the gate). Up to ``concurrent`` times ``1 + SPARE`` requests hold a place at
once (the engine loop seats ``concurrent`` of them and shares the rest in time, by the same measure); the others
wait here. When a place frees it goes to the least served pool, within it to the least served client, within that to
its least served session (then the fewest turns taken, then first come), and within the session to its oldest
request. A flow that becomes active starts a head start below the floor of the flows beside it (``Ledger.enter``),
so a newcomer goes next but cannot bank credit by idling. When every place is taken, a request
less served than the most served holder takes one of ``overflow`` further places (``concurrent``): the engine loop
then pauses that holder's decode for it. Nothing a request declares about itself (its size, its settings) enters
the order: a small but slow decode, a link or a Sweep is charged what its forwards take.

Refusals, each a one-line message, only to bound memory:
- a **session** holds one running and one waiting request of each kind (``PER_SESSION``);
- the queue is **full**: ``UNMASK_WAITING`` requests waiting in all (default 256), or ``UNMASK_PER_ADDRESS`` of one
  pool (default 128: a class of 64 behind one address, each with a request running and one waiting). Then the most
  served waiting request of that scope (the newest among equals) leaves to make room, or the newcomer is refused
  when that is itself;
- the **budget**: a request's ``UNMASK_MAX_SECONDS`` counts from its arrival (``presence.arrived``), its wait here
  included; one still waiting when it passes ends with one line. A request that has to wait is told so in one line
  when its wait starts (``WAITING``, through the handler's ``tell``: the page's and ``gradio_client``'s pop-up).

A request whose client is gone (``explorer.page.presence``) never waits: its client's stream must be open
(``presence.confirm``), and a waiter whose client leaves is passed over and leaves the queue. The page's model events
let ``CAPACITY`` requests into their handlers, more than the gate ever holds, so the gate, not gradio's first-come
queue, decides the order.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import itertools
import time
from collections import Counter, deque
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from engine import settings
from engine.runtime.ledger import Ledger
from explorer.page import presence
from explorer.page.presence import Gone
from explorer.page.proxy import client_key, pool_of

pooled = functools.lru_cache(maxsize=4096)(pool_of)

SPARE = 3                 # further places per running place: one decode from each of many flows waits in the engine
                          # loop, which shares its places in time, not here, where only a decode's end frees a place
CAPACITY = 10_000         # model requests gradio lets into their handlers at once (the gate holds far fewer)
PER_SESSION = 2           # one running and one waiting, per kind
BUSY = "you already have a {kind} running and one waiting: wait for them to finish, or press Stop"
FULL = ("the server's queue is full ({n} requests waiting, {mine} of them from your network, {pool}): try again in "
        "a minute")
TAKEN = "the server's queue is full and a visitor served less than you took your place: try again in a minute"
WAITING = ("the model is busy: this request waits for its turn ({n} waiting); the wait counts in its time budget of "
           "{b:g} s")
WAITED = ("the server is busy: this request waited {s:.0f} s for the model, its whole time budget of {b:g} s "
          "(UNMASK_MAX_SECONDS): try again in a minute")

CLIENT = contextvars.ContextVar("unmask_client", default="")   # the request's flow, for the engine loop
LEDGER = contextvars.ContextVar("unmask_ledger", default=None)  # the gate's ledger, for the request's own charges


def client():
    """The flow of the request being served, (pool, client, session): what the engine loop charges its time to."""
    return CLIENT.get()


def charge(seconds: float) -> None:
    """Charge the request being served for work it did outside the engine (its page drawing,
    ``worker.in_thread``): the same ledger as its engine time, so a flow that draws much is served less. Nothing
    outside a gate's place (the accounts are active only while the request holds or waits for one)."""
    ledger = LEDGER.get()
    if ledger is not None:
        ledger.charge(CLIENT.get(), seconds)


class Busy(Exception):
    """A visitor asked for more than its share, or the queue is full; the message is for the page."""


@dataclass(eq=False)
class _Waiter:
    path: tuple
    future: asyncio.Future
    present: object           # () -> bool: its client is still there
    seq: int                  # arrival order


@dataclass
class FairGate:
    concurrent: int = 1                                   # requests the engine loop seats (its max_running)
    spare: int | None = None                              # places beyond them (``SPARE`` times ``concurrent``)
    overflow: int | None = None                           # places beyond those for the less served (``concurrent``)
    waiting_cap: int = field(default_factory=lambda: settings.get("UNMASK_WAITING"))
    per_pool: int = field(default_factory=lambda: settings.get("UNMASK_PER_ADDRESS"))
    budget_s: float = field(default_factory=lambda: settings.get("UNMASK_MAX_SECONDS"))
    ledger: Ledger = field(default_factory=Ledger)        # measured service (the engine loop's, on the page)
    streams: presence.Streams | None = None               # whose clients are still there (None: all are)
    held: Counter = field(default_factory=Counter)        # (kind, session) -> its requests running or waiting
    queues: dict = field(default_factory=dict)            # path -> deque of _Waiter, oldest first
    holding: Counter = field(default_factory=Counter)     # path -> places it holds
    unopened: Counter = field(default_factory=Counter)    # pool -> requests waiting for their client's stream
    active: int = 0
    _seq: itertools.count = field(default_factory=itertools.count)

    def __post_init__(self):
        if self.spare is None:
            self.spare = SPARE * self.concurrent
        if self.overflow is None:
            self.overflow = self.concurrent

    @property
    def waiting(self) -> int:
        return sum(len(q) for q in self.queues.values())

    def may_enter(self, path: tuple) -> bool:
        """A place is free, or ``path`` is less served than the most served holder and one of ``overflow``
        further places is free (the engine loop pauses that holder's decode for it)."""
        if self.active < self.concurrent + self.spare:
            return True
        if self.active >= self.concurrent + self.spare + self.overflow or not self.holding:
            return False
        return any(self.ledger.ahead(p, path) for p in self.holding)

    @asynccontextmanager
    async def slot(self, kind: str, request, tell=None):
        """Hold a place for one request of this visitor once its turn comes (``Busy`` beyond its session's share,
        when the queue is full and it is the one to go, or when its budget passes while it waits; ``Gone`` if its
        client leaves first). ``tell(line)``: the visitor is told in one line when the request starts to wait."""
        session = getattr(request, "session_hash", None) or ""
        who = client_key(getattr(getattr(request, "client", None), "host", None))
        path = (pooled(who), who, session)
        key = (kind, session)
        if session and self.held[key] >= PER_SESSION:
            raise Busy(BUSY.format(kind=kind))
        CLIENT.set(path)
        LEDGER.set(self.ledger)
        present = presence.watch(self.streams, session or None)
        self.held[key] += 1
        self.ledger.enter(path)
        try:
            await self._confirm(path, session)
            await self._acquire(path, present, tell)
            try:
                yield
            finally:
                self._release(path)
        finally:
            self.ledger.leave(path)
            self.held[key] -= 1
            if self.held[key] <= 0:
                del self.held[key]

    async def _confirm(self, path: tuple, session: str) -> None:
        """``presence.confirm`` within the queue's bounds: requests whose stream is not open yet count against
        their pool's and the total's (a flood of streamless POSTs, each with a session of its own choosing, would
        otherwise wait ``GRACE_S`` each, unbounded, before the queue's limits apply). A full queue treats such a
        newcomer as ``_make_room`` does: the most served waiting request leaves for one served less."""
        if not presence.unopened(self.streams, session):
            return
        pool, waiting = path[0], self.waiting + sum(self.unopened.values())
        if self.unopened[pool] >= self.per_pool or (waiting >= self.waiting_cap and not self.queues):
            raise Busy(FULL.format(n=waiting, mine=self.unopened[pool], pool=pool))
        if waiting >= self.waiting_cap:                   # the same rule as a full queue's: the most served goes
            self._evict(path, [w for q in self.queues.values() for w in q])
        self.unopened[pool] += 1
        try:
            await presence.confirm(self.streams, session)
        finally:
            self.unopened[pool] -= 1
            if self.unopened[pool] <= 0:
                del self.unopened[pool]

    async def _acquire(self, path: tuple, present, tell=None) -> None:
        if not self.waiting and self.may_enter(path):
            self._take(path)
            return
        self._make_room(path)
        w = _Waiter(path, asyncio.get_running_loop().create_future(), present, next(self._seq))
        self.queues.setdefault(path, deque()).append(w)
        self._grant()                                     # a place may be free (a gone waiter left)
        if tell is not None and not w.future.done():      # it waits: say so once, before the wait
            tell(WAITING.format(n=self.waiting, b=self.budget_s))
        arrived = presence.arrived() or time.monotonic()
        left = self.budget_s - (time.monotonic() - arrived)
        try:
            done, _ = await asyncio.wait({w.future}, timeout=max(left, 0.0))
        except asyncio.CancelledError:                    # the visitor left while waiting
            if not self._remove(w) and w.future.done() and not w.future.cancelled() \
                    and w.future.exception() is None:
                self._release(path)                       # handed a place just now: pass it on
            raise
        if not done and self._remove(w):
            raise Busy(WAITED.format(s=time.monotonic() - arrived, b=self.budget_s))
        w.future.result()                                 # its place, or why it has none

    def _make_room(self, path: tuple) -> None:
        """A full pool or queue: its most served waiting request leaves (``TAKEN``), or the newcomer is refused
        when it would be that one itself."""
        pool = [w for p, q in self.queues.items() if p[0] == path[0] for w in q]
        if len(pool) >= self.per_pool:
            self._evict(path, pool)
        if self.waiting >= self.waiting_cap:
            self._evict(path, [w for q in self.queues.values() for w in q])

    def _evict(self, path: tuple, scope: list) -> None:
        worst = max(scope, key=lambda w: (self.ledger.key(w.path), w.seq))
        mine = sum(1 for w in scope if w.path[0] == path[0])
        if not self.ledger.ahead(worst.path, path):       # the newcomer is served as much or more: it goes
            raise Busy(FULL.format(n=self.waiting, mine=mine, pool=path[0]))
        self._remove(worst)
        worst.future.set_exception(Busy(TAKEN))

    def _take(self, path: tuple) -> None:
        self.active += 1
        self.holding[path] += 1
        self.ledger.seated(path)

    def _release(self, path: tuple) -> None:
        self.active -= 1
        self.holding[path] -= 1
        if self.holding[path] <= 0:
            del self.holding[path]
        self._grant()

    def _grant(self) -> None:
        """Hand the free places to the least served waiters, passing over those whose client has gone."""
        while self.queues:
            w = self._next()
            if not self.may_enter(w.path):
                break
            self._remove(w)
            if w.future.done():                           # cancelled: its task cleans up after itself
                continue
            if not w.present():
                w.future.set_exception(Gone("the client left while its request waited"))
                continue
            self._take(w.path)
            w.future.set_result(True)

    def _next(self) -> _Waiter:
        """The least served flow's oldest waiting request (``Ledger.key``: pool, then client, then session)."""
        path = min(self.queues, key=self.ledger.key)
        return self.queues[path][0]

    def _remove(self, w: _Waiter) -> bool:
        q = self.queues.get(w.path)
        if q is None or w not in q:
            return False
        q.remove(w)
        if not q:
            del self.queues[w.path]
        return True
