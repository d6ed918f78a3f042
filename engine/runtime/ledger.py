"""Measured service: what each flow of work has consumed of the engine, the one measure of fairness for the engine
loop (``engine.runtime.share``) and the page's gate (``explorer.page.fair``).

A flow is named by its path of accounts, outermost first: the page's requests by (pool, client, session) (an IPv4
/24 or IPv6 /32, an address or IPv6 /48, a browser session), the engine's own callers (the CLI, a bench) by one
string. Every account accrues the engine seconds its decodes' rows took (``charge``: a round's time split over its
rows by their query tokens, plus each decode's own rule). Siblings are compared by their service, then by the turns
they took (places and seats), then first come first: start-time fair queueing over a hierarchy (Goyal, Vin and
Cheng, 1996), as Linux's CFS orders tasks by virtual runtime. An account that becomes active starts ``HEAD_START_S``
below its siblings' floor (``enter``): the least service of the active ones that have run, never lowered (CFS's
``min_vruntime``; CFS places a waking task half a latency below it); level with them while none has run yet. So a newcomer is served next, ahead of the flows already active
until it has taken that much engine time (a light decode ends within it, in rounds of its own: under equal shares,
its rounds would carry every holder's rows), but it banks nothing by idling (every newcomer gets the same head start
from the same floor) and newcomers of one burst start level and are served together. An account with nothing left
active is forgotten (``leave``), so memory is bounded by the work present.

No torch here.
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter

GRANULARITY_S = 0.02    # engine seconds a seated decode keeps its place, and the lead a flow may have and still
                        # share a round with the least served (``share``)
HEAD_START_S = 0.5      # engine seconds a newcomer starts below the floor: about a light decode's own time alone


def path_of(client) -> tuple:
    """A flow's accounts: a tuple as it is, one string as a path of one."""
    return client if isinstance(client, tuple) else (client,)


def prefixes(client) -> list[tuple]:
    path = path_of(client)
    return [path[:n] for n in range(1, len(path) + 1)]


class Ledger:
    """See the module's docstring. Read and written from the engine thread, the page's event loop and its workers:
    every method holds ``lock``."""

    def __init__(self):
        self.lock = threading.RLock()
        self.service: dict[tuple, float] = {}   # active account -> engine seconds charged since it became active
        self.users: Counter = Counter()          # account -> requests and decodes keeping it active
        self.turns: Counter = Counter()          # account -> places and seats it took while active
        self.since: dict[tuple, int] = {}        # account -> when it became active (first come first among equals)
        self.begun: dict[tuple, float] = {}      # account -> its service when it became active
        self.floor: dict[tuple, float] = {}      # parent account -> its children's least service, never lowered
        self._seq = itertools.count()

    def enter(self, client) -> None:
        """A request or decode of ``client`` arrives: its accounts become active, a new one at ``_start``."""
        with self.lock:
            for k in prefixes(client):
                if not self.users[k]:
                    self.service[k] = self.begun[k] = self._start(k)
                    self.since[k] = next(self._seq)
                self.users[k] += 1

    def _start(self, k: tuple) -> float:
        """Level with its siblings while none has run yet; else ``HEAD_START_S`` below the floor: the least service
        of the siblings that have run, never lowered (so newcomers of one burst start level, whatever ran since)."""
        parent = k[:-1]
        siblings = [a for a in self.service if len(a) == len(k) and a[:-1] == parent]
        ran = [self.service[a] for a in siblings if self.service[a] > self.begun[a]]
        if not ran:
            return min((self.service[a] for a in siblings), default=self.floor.get(parent, 0.0))
        self.floor[parent] = max(self.floor.get(parent, min(ran)), min(ran))
        return self.floor[parent] - HEAD_START_S

    def leave(self, client) -> None:
        with self.lock:
            for k in prefixes(client):
                self.users[k] -= 1
                if self.users[k] <= 0:
                    for d in (self.users, self.service, self.begun, self.since, self.turns, self.floor):
                        d.pop(k, None)

    def charge(self, client, seconds: float) -> None:
        with self.lock:
            for k in prefixes(client):
                if k in self.service:
                    self.service[k] += seconds

    def seated(self, client) -> None:
        """A request of ``client`` took a place (the gate's) or a seat (the engine loop's)."""
        with self.lock:
            for k in prefixes(client):
                if k in self.service:
                    self.turns[k] += 1

    def key(self, client) -> tuple:
        """The flow's order: the least served first, level by level (pool, then client, then session)."""
        with self.lock:
            return tuple((self.service.get(k, 0.0), self.turns[k], self.since.get(k, -1)) for k in prefixes(client))

    def ahead(self, a, b) -> bool:
        """Whether flow ``a`` is served more than flow ``b`` (service, then turns) at the first level where their
        accounts differ (False for one flow): what lets ``b`` take a place ``a`` holds."""
        with self.lock:
            for ka, kb in zip(prefixes(a), prefixes(b)):
                if ka != kb:
                    return (self.service.get(ka, 0.0), self.turns[ka]) > (self.service.get(kb, 0.0), self.turns[kb])
        return False

    def lag(self, a, b) -> float:
        """How far flow ``a`` is ahead of flow ``b``: at the first level where their accounts differ, the service of
        a's less b's (0 for one flow)."""
        with self.lock:
            for ka, kb in zip(prefixes(a), prefixes(b)):
                if ka != kb:
                    return self.service.get(ka, 0.0) - self.service.get(kb, 0.0)
        return 0.0

    def active(self) -> int:
        with self.lock:
            return len(self.service)
