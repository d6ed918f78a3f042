"""Fair queueing of the one model among the visitors of a public Space: it orders requests, and refuses none while
the model has a free place or the queue has room (work-conserving, as Linux's fq and DRR schedulers, vLLM's and
SGLang's priority queues and gradio's own queue).

Every request that runs the model (a run of the page, Compare, Branch, Sweep, the ``decode`` API) passes the gate.
Up to ``concurrent`` requests (the engine loop's ``max_running``) hold a place at once and share the loop's batched
rounds; the others wait here. When a place frees, it goes to the **client** (an address, ``explorer.page.proxy``)
with the fewest requests running, then the fewest turns taken since it last had nothing to do (max-min fairness,
as the engine loop's admission), the least recently served first among equals; within that client, to its
**session** chosen the same way; within the session, to its oldest request. So twelve visitors behind
one address (a class on a school's network, or every visitor of a Space without a named proxy) are served like any
twelve, a flooding session of that address waits behind its classmates' first requests, and a visitor from another
address gets the next free place. A client holding nothing, or at least two places fewer than the client holding
the most, need not wait for one to free: it takes one of ``spare`` further places (``SPARE`` times ``concurrent``),
and the engine loop seats it by pausing one of the heaviest client's decodes or, when one decode each of many
clients holds every place, the decode that has held its place longest (``engine.runtime.share``), so no visitor
waits out another's budget.

Sizes: each request comes with its size (``size_of``: generation length times canvas). Among clients with as many
running and as many turns, the smallest request goes first; a client holding nothing whose request is ``LIGHT``
times smaller than the largest one holding a place takes one of ``concurrent`` light places beyond the spare ones,
and the engine loop seats it within a round or two by pausing a heavy decode (``engine.runtime.share``). So one
heavy request from each of many addresses does not hold a light visitor back, whatever their number.

Refusals, each a one-line message:
- a **session** holds one running and one waiting request of each kind (``PER_SESSION``);
- the queue is **full**: ``UNMASK_WAITING`` requests waiting in all (default 256), or ``UNMASK_PER_ADDRESS`` of one
  client (default 128: a class of 64 behind one address, each with a request running and one waiting), or as many
  of one pool of clients, an IPv4 /24 or an IPv6 /32 (``proxy.pool_of``: a pool of addresses cannot fill the
  queue). Then the
  refused request is the newest of the client holding the most: the newcomer if that is its own client, else that
  client's newest waiting request, which leaves the queue to make room. A newcomer whose client has nothing
  waiting is never locked out by many one-request clients: it takes the place of the newest waiting request of a
  client that is running or was served lately (``recent``), if there is one, else of the newest of the largest
  waiting requests ``LIGHT`` times its own size;
- a **burst**: clients never served that came within ``BURST_S`` of each other and wait are at most a quarter of
  ``UNMASK_WAITING`` (at least ``BURST_MIN``): one more is refused, or takes the place of a request of the burst
  ``LIGHT`` times its size (a pool of addresses across networks cannot fill the queue).

Among clients with as many running, one never served (or not within the last ``RECENT`` clients served) goes
first, then the least recently served: not arrival order, so a fresh visitor does not wait behind a hundred
clients who each come back for more.

A waiting request whose client has gone (``explorer.page.presence``) is passed over and leaves the queue. The page's
model events let ``CAPACITY`` requests into their handlers, more than the gate ever holds, so the gate, not gradio's
first-come queue, decides the order.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import itertools
import time
from collections import Counter, OrderedDict, deque
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from engine import settings
from engine.catalogue import catalogue
from engine.catalogue.spec import parse_spec
from engine.errors import UserError
from engine.runtime.share import LIGHT      # one rule of "light" for the gate and the engine loop: 4x smaller
from explorer.page import presence
from explorer.page.presence import Gone
from explorer.page.proxy import client_key, pool_of

pooled = functools.lru_cache(maxsize=4096)(pool_of)

SPARE = 3                 # spare places per running place: one decode from each of many clients waits in the engine
                          # loop, which shares its places in time, not here, where only a decode's end frees a place
DEFAULT_SIZE = 64 * 128   # a request's size when its caller gives none: the page's default run (64 new tokens)
BURST_S = 10.0            # clients first seen within this many seconds of each other, never served, are one burst
BURST_MIN = 16            # clients one burst may have waiting, at least (else a quarter of the queue's bound)
CAPACITY = 10_000         # model requests gradio lets into their handlers at once (the gate holds far fewer)
PER_SESSION = 2           # one running and one waiting, per kind
BUSY = "you already have a {kind} running and one waiting: wait for them to finish, or press Stop"
RECENT = 4096            # clients whose last turn is remembered after they went idle (least recent service first)
TAKEN = "the server's queue is full and a visitor not yet served took your place: try again in a minute"
FULL = ("the server's queue is full ({n} requests waiting, {mine} of them from your address): try again in a "
        "minute")
BURST_FULL = ("the server's queue is full ({n} visitors new to it came in the last {s:g} s and wait): try again in "
              "a minute")
POOL_FULL = ("the server's queue is full ({n} requests waiting, {mine} of them from your network, {pool}): try "
             "again in a minute")

CLIENT = contextvars.ContextVar("unmask_client", default="")   # the request's client, for the engine loop


def client() -> str:
    """The client of the request being served (its address): the engine loop's unit of fairness."""
    return CLIENT.get()


def size_of(prompt, spec) -> int | None:
    """A request's size for the gate's order (smallest first among equals) and its light places: its generation
    length times its canvas, the prompt's characters bounding its tokens (as the engine loop's ``Job.size`` counts
    tokens). ``spec``: (decoder, params) or the SPEC text; None (``DEFAULT_SIZE``) when it does not parse: the run
    refuses it itself."""
    try:
        name, params = parse_spec(spec) if isinstance(spec, str) else spec
        values = catalogue.validate(name, params or {}, page=True)
        n = int(values.get("gen_length", catalogue.params_of(name)["gen_length"].default))
    except (UserError, TypeError, ValueError):
        return None
    return n * (len(prompt if isinstance(prompt, str) else "") + n)


class Busy(Exception):
    """A visitor asked for more than its share, or the queue is full; the message is for the page."""


@dataclass(eq=False)
class _Waiter:
    client: str
    session: str
    future: asyncio.Future
    present: object           # () -> bool: its client is still there
    seq: int                  # arrival order
    size: int = DEFAULT_SIZE  # its work (``size_of``): the smaller goes first among equals, and may be let through


@dataclass
class FairGate:
    concurrent: int = 1                                   # requests holding a place (the engine loop's max_running)
    spare: int | None = None                              # places beyond them for clients below their share
    waiting_cap: int = field(default_factory=lambda: settings.get("UNMASK_WAITING"))
    per_client: int = field(default_factory=lambda: settings.get("UNMASK_PER_ADDRESS"))
    held: Counter = field(default_factory=Counter)        # (kind, session) -> its requests running or waiting
    queues: dict = field(default_factory=dict)            # client -> OrderedDict(session -> deque of _Waiter)
    running: Counter = field(default_factory=Counter)     # client, and (client, session) -> requests holding places
    served: Counter = field(default_factory=Counter)      # client, and (client, session) -> turns taken while busy
    last: dict = field(default_factory=dict)              # client, and (client, session) -> seq of its last turn
    recent: OrderedDict = field(default_factory=OrderedDict)   # client -> seq of its last turn, kept when idle
    streams: presence.Streams | None = None               # whose clients are still there (None: all are)
    active: int = 0
    sizes: Counter = field(default_factory=Counter)       # the sizes of the requests holding places
    new: dict = field(default_factory=dict)               # client never served -> when it first waited (bursts)
    _seq: itertools.count = field(default_factory=itertools.count)

    def __post_init__(self):
        if self.spare is None:
            self.spare = SPARE * self.concurrent

    def below_share(self, who: str, size: int = DEFAULT_SIZE) -> bool:
        """A spare place is free and ``who`` holds nothing, or at least two places fewer than the client holding
        the most: it is let through to the engine loop, which pauses one of that client's decodes (preemption) or,
        every place being held by one decode each of many clients, the decode that has held its place longest
        (round robin in time) to seat it (``engine.runtime.share``). Past the spare places, a client holding nothing
        whose request is ``LIGHT`` times smaller than the largest holding a place takes one of ``concurrent`` light
        places (the engine loop seats it within a round or two, so a light visitor does not wait for a heavy one of
        many identities to end)."""
        most = max((n for k, n in self.running.items() if isinstance(k, str)), default=0)
        held = self.running[who]
        if held and held + 1 >= most:
            return False
        if self.active < self.concurrent + self.spare:
            return True
        heaviest = max(self.sizes, default=0)
        return not held and self.active < 2 * self.concurrent + self.spare and size * LIGHT <= heaviest

    @property
    def waiting(self) -> int:
        return sum(len(q) for sessions in self.queues.values() for q in sessions.values())

    def waiting_of(self, who: str) -> int:
        return sum(len(q) for q in self.queues.get(who, {}).values())

    @asynccontextmanager
    async def slot(self, kind: str, request, size: int | None = None):
        """Hold a place for one request of this visitor once its turn comes (``Busy`` beyond its session's share
        or when the queue is full and it is the one to go; ``Gone`` if its client leaves while it waits). ``size``:
        its work (``size_of``; None: ``DEFAULT_SIZE``)."""
        size = DEFAULT_SIZE if size is None else size
        session = getattr(request, "session_hash", None) or ""
        who = client_key(getattr(getattr(request, "client", None), "host", None))
        key = (kind, session)
        if session and self.held[key] >= PER_SESSION:
            raise Busy(BUSY.format(kind=kind))
        CLIENT.set(who)
        present = presence.watch(self.streams, session or None)
        self.held[key] += 1
        try:
            await self._acquire(who, session, present, size)
            try:
                yield
            finally:
                self._release(who, session, size)
        finally:
            self.held[key] -= 1
            if self.held[key] <= 0:
                del self.held[key]

    async def _acquire(self, who: str, session: str, present, size: int) -> None:
        if (self.active < self.concurrent or self.below_share(who, size)) and not self.waiting:
            self._take(who, session, size)
            return
        self._make_room(who, size)
        w = _Waiter(who, session, asyncio.get_running_loop().create_future(), present, next(self._seq), size)
        if who not in self.recent and not self.running[who]:
            self.new.setdefault(who, time.monotonic())
        self.queues.setdefault(who, OrderedDict()).setdefault(session, deque()).append(w)
        self._grant()                                     # a place may be free (a gone waiter left)
        try:
            await w.future
        except asyncio.CancelledError:                    # the visitor left while waiting
            if self._remove(w):
                self._forget(who, session)
            elif w.future.done() and not w.future.cancelled() and w.future.exception() is None:
                self._release(who, session, size)         # handed a place just now: pass it on
            raise

    def _make_room(self, who: str, size: int) -> None:
        """Refuse the newest request of the client holding the most when the queue is full (the newcomer itself when
        that is its client, or it is over its own client's bound); a newcomer with nothing waiting takes the place
        of a waiting request ``LIGHT`` times its size, if any. Clients never served that came in one burst
        (``BURST_S``) are at most a quarter of the queue's bound (``_within_burst``)."""
        mine = self.waiting_of(who) + 1
        if mine > self.per_client:
            raise Busy(FULL.format(n=self.waiting, mine=mine - 1))
        pool = pooled(who)                            # many addresses of one network count together
        together = sum(self.waiting_of(c) for c in self.queues if pooled(c) == pool) + 1
        if together > self.per_client:
            raise Busy(POOL_FULL.format(n=self.waiting, mine=together - 1, pool=pool))
        if who not in self.recent and not self.running[who]:
            self._within_burst(who, size)
        if self.waiting < self.waiting_cap:
            return
        if mine == 1 and (self._displace() or self._displace_heavier(size, self.queues)):
            return
        heaviest = max(self.queues, key=self.waiting_of)
        if self.waiting_of(heaviest) <= mine:
            raise Busy(FULL.format(n=self.waiting, mine=mine - 1))
        newest = max((w for q in self.queues[heaviest].values() for w in q), key=lambda w: w.seq)
        self._remove(newest)
        self._forget(newest.client, newest.session)
        newest.future.set_exception(Busy(FULL.format(n=self.waiting, mine=self.waiting_of(heaviest))))

    def _displace(self) -> bool:
        """A newcomer with nothing waiting takes the place of the newest waiting request of the client, among those
        running or served lately, with the most waiting (then the most recently served); False if there is none."""
        served = [c for c in self.queues if self.running[c] or c in self.recent]
        if not served:
            return False
        who = max(served, key=lambda c: (self.waiting_of(c), self.recent.get(c, -1)))
        newest = max((w for q in self.queues[who].values() for w in q), key=lambda w: w.seq)
        self._remove(newest)
        self._forget(newest.client, newest.session)
        newest.future.set_exception(Busy(TAKEN))
        return True

    def _within_burst(self, who: str, size: int) -> None:
        """A client never served joins the burst of the others first seen within ``BURST_S`` that wait: past a
        quarter of the queue's bound of them (at least ``BURST_MIN``), it takes the place of a request of the burst
        ``LIGHT`` times its size, or is refused (a pool of addresses, one request each, cannot fill the queue; a
        class behind one address is one client; a visitor who comes after the burst is not in it)."""
        now = time.monotonic()
        burst = [c for c, t in self.new.items() if now - t <= BURST_S and c != who and c in self.queues]
        if who in self.new or len(burst) < max(BURST_MIN, self.waiting_cap // 4):
            return
        if not self._displace_heavier(size, burst):
            raise Busy(BURST_FULL.format(n=len(burst), s=BURST_S))

    def _displace_heavier(self, size: int, clients) -> bool:
        """The newest of the largest waiting requests of ``clients`` leaves the queue (``TAKEN``) if it is ``LIGHT``
        times ``size``; False if none is."""
        waiters = [w for c in clients for q in self.queues.get(c, {}).values() for w in q]
        heaviest = max(waiters, key=lambda w: (w.size, w.seq), default=None)
        if heaviest is None or heaviest.size < size * LIGHT:
            return False
        self._remove(heaviest)
        self._forget(heaviest.client, heaviest.session)
        heaviest.future.set_exception(Busy(TAKEN))
        return True

    def _take(self, who: str, session: str, size: int) -> None:
        self.active += 1
        self.sizes[size] += 1
        self.new.pop(who, None)
        self.running[who] += 1
        self.running[(who, session)] += 1
        self.served[who] += 1
        self.served[(who, session)] += 1
        turn = next(self._seq)
        self.last[who] = self.last[(who, session)] = turn
        self.recent[who] = turn
        self.recent.move_to_end(who)
        if len(self.recent) > RECENT:                     # bounded: the longest-ago served is forgotten
            self.recent.popitem(last=False)

    def _release(self, who: str, session: str, size: int) -> None:
        self.active -= 1
        self.sizes[size] -= 1
        if self.sizes[size] <= 0:
            del self.sizes[size]
        for k in (who, (who, session)):
            self.running[k] -= 1
            if self.running[k] <= 0:
                del self.running[k]
        self._forget(who, session)
        self._grant()

    def _grant(self) -> None:
        """Hand the free places to the next waiters in fair order, passing over those whose client has gone."""
        while self.queues:
            w = self._next()
            if self.active >= self.concurrent and not self.below_share(w.client, w.size):
                break
            self._remove(w)
            if w.future.done():                           # cancelled: its task cleans up after itself
                continue
            if not w.present():
                self._forget(w.client, w.session)
                w.future.set_exception(Gone("the client left while its request waited"))
                continue
            self._take(w.client, w.session, w.size)
            w.future.set_result(True)

    def _next(self) -> _Waiter:
        """The client with the fewest running, then the fewest turns taken since it last had nothing to do, then the
        smallest request (shortest job first: many identities' one heavy request each do not hold a light visitor
        back), then the longest since its last turn, remembered past idle times (never served first; first come
        among those); its session likewise (its last turn forgotten once idle); that session's oldest."""
        order = lambda k: (self.running[k], self.served[k], self.last.get(k, -1))  # noqa: E731
        smallest = lambda c: min(w.size for q in self.queues[c].values() for w in q)  # noqa: E731
        who = min(self.queues, key=lambda c: (self.running[c], self.served[c], smallest(c), self.recent.get(c, -1)))
        session = min(self.queues[who], key=lambda s: order((who, s)))
        return self.queues[who][session][0]

    def _remove(self, w: _Waiter) -> bool:
        sessions = self.queues.get(w.client, {})
        q = sessions.get(w.session)
        if q is None or w not in q:
            return False
        q.remove(w)
        if not q:
            del sessions[w.session]
        if not sessions:
            del self.queues[w.client]
        return True

    def _forget(self, who: str, session: str) -> None:
        """Drop the round-robin memory of a client or session with nothing running or waiting (a public server
        meets many addresses)."""
        for k, idle in (((who, session), session not in self.queues.get(who, {})), (who, who not in self.queues)):
            if idle and not self.running[k]:
                self.last.pop(k, None)
                self.served.pop(k, None)
                self.new.pop(k, None)
