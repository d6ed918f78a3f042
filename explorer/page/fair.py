"""Fair use of the one model among the visitors of a public Space.

Every request that runs the model (a run of the page, Compare, Sweep, the ``decode`` API) passes the gate. The unit
of fairness is the client: its address, as the socket gives it, or as ``X-Forwarded-For`` gives it only when the
peer is a proxy the operator named (``UNMASK_TRUSTED_PROXIES``, applied by app.py to uvicorn's
``FORWARDED_ALLOW_IPS``; otherwise a forged header changes nothing). A client holds at most ``UNMASK_PER_ADDRESS``
(default 4) running and waiting requests of all kinds together, however many sessions it opens; within that, a
session holds one running and one waiting request of each kind. Further requests are refused at once with a
one-line message.

Up to ``concurrent`` requests (the engine loop's ``max_running``) run at once: their decodes share the engine
loop's rounds (``engine.runtime.engine_loop``, which admits decodes round robin over clients). Past that, when a
place frees, the next is the longest-waiting request of a visitor other than the one just served (round robin), so
a second visitor waits about one request's budget behind a flooding one, never behind its whole queue. The page's model events admit many requests into their handlers at once
(``CAPACITY``): the gate, not gradio's queue, decides who waits, and a flood is refused in milliseconds instead of
filling the queue.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import Counter
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from engine import settings

CAPACITY = 64             # model requests admitted into their handlers at once (the gate queues them)
PER_SESSION = 2           # one running and one waiting, per kind
BUSY = ("you already have a {kind} running and one waiting: wait for them to finish, or press Stop")
BUSY_CLIENT = ("your address already has {n} requests running or waiting (from all its tabs and sessions): wait for "
               "one to finish")
ANY = "*"                 # the kind of a client's key: its cap spans every kind


CLIENT = contextvars.ContextVar("unmask_client", default="")   # the request's client, for the engine loop


def per_address() -> int:
    return settings.get("UNMASK_PER_ADDRESS")


def client() -> str:
    """The client of the request being served (its address): the engine loop's unit of fairness."""
    return CLIENT.get()


def who(keys: tuple):
    """The visitor behind a request's keys, whatever its kind: its session, else its address."""
    return next(((k[1], k[2]) for k in keys if k[1] == "session"), next(((k[1], k[2]) for k in keys), None))


class Busy(Exception):
    """A visitor asked for more than its share; the message is for the page."""


@dataclass
class _Waiter:
    keys: tuple
    future: asyncio.Future


@dataclass
class FairGate:
    per_address: int = field(default_factory=per_address)
    held: Counter = field(default_factory=Counter)       # key -> requests of that visitor running or waiting
    waiting: list = field(default_factory=list)          # _Waiter, in arrival order
    concurrent: int = 1                                  # requests running at once (the engine loop's max_running)
    active: int = 0
    served: tuple = ()                                   # the keys of the request served last

    def keys(self, kind: str, request) -> tuple:
        """(kind, "session", hash) and ("*", "address", host) of the request, those it has: a session's share is
        per kind, a client's spans every kind."""
        session = getattr(request, "session_hash", None)
        host = getattr(getattr(request, "client", None), "host", None)
        return tuple(k for k in ((kind, "session", session), (ANY, "address", host)) if k[2])

    def cap(self, key: tuple) -> int:
        return PER_SESSION if key[1] == "session" else self.per_address

    @asynccontextmanager
    async def slot(self, kind: str, request):
        """Hold the model for one request of this visitor, after those before it (``Busy`` beyond its share)."""
        keys = self.keys(kind, request)
        for k in keys:
            if self.held[k] >= self.cap(k):
                raise Busy(BUSY.format(kind=kind) if k[1] == "session" else BUSY_CLIENT.format(n=self.held[k]))
        self.held.update(keys)
        CLIENT.set(next((k[2] for k in keys if k[1] == "address"), ""))
        try:
            await self._acquire(keys)
            try:
                yield
            finally:
                self._release()
        finally:
            self.held.subtract(keys)
            self.held += Counter()                       # drop the keys at zero

    async def _acquire(self, keys: tuple) -> None:
        if self.active < self.concurrent and not self.waiting:
            self.active, self.served = self.active + 1, keys
            return
        waiter = _Waiter(keys, asyncio.get_running_loop().create_future())
        self.waiting.append(waiter)
        try:
            await waiter.future
        except asyncio.CancelledError:                   # the visitor left while waiting
            if waiter in self.waiting:
                self.waiting.remove(waiter)
            elif waiter.future.done() and not waiter.future.cancelled():
                self._release()                          # handed the model just now: pass it on
            raise

    def _release(self) -> None:
        """Hand the freed place to the first waiter of another visitor than the one just served, else the
        first."""
        live = [w for w in self.waiting if not w.future.done()]      # a cancelled waiter leaves on its own
        if not live:
            self.active -= 1
            return
        other = next((w for w in live if who(w.keys) != who(self.served)), live[0])
        self.waiting.remove(other)
        self.served = other.keys
        other.future.set_result(True)
