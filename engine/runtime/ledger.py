"""Measured service: what each flow of work has consumed of the engine, the one measure of fairness for the engine
loop (``engine.runtime.share``) and the page's gate (``explorer.page.fair``).

A flow is named by its path of accounts, outermost first: the page's requests by (pool, client, session) (an IPv4
/24 or IPv6 /32, an address or IPv6 /48, a browser session), the engine's own callers (the CLI, a bench) by one
string. Every account accrues the engine seconds its decodes' rows took (``charge``: a round's time split over its
rows by their query tokens, plus each decode's own rule). Siblings are compared by their service, then by the turns
they took (places and seats), then first come first: start-time fair queueing over a hierarchy (Goyal, Vin and
Cheng, 1996), as Linux's CFS orders tasks by virtual runtime. An account that becomes active starts ``GRANULARITY_S``
below the least service of its active siblings that took a turn (as CFS places a waking task half a latency below
its queue's minimum), never above the least of all of them (``enter``): it is served next, ahead of flows already
served, but cannot bank more credit than that by idling, and a burst of newcomers is served first come first. One
with nothing left active is forgotten (``leave``), so memory is bounded by the work present.

No torch here.
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter

GRANULARITY_S = 0.02    # engine seconds: a newcomer's head start, how long a seated decode keeps its place, and
                        # the lead a flow may have and still share a round with the least served (``share``)


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
        self._seq = itertools.count()

    def enter(self, client) -> None:
        """A request or decode of ``client`` arrives: its accounts become active, a new one just below the least
        served of its active siblings that took a turn (see the module's docstring)."""
        with self.lock:
            for k in prefixes(client):
                if not self.users[k]:
                    self.service[k] = self._start(k)
                    self.since[k] = next(self._seq)
                self.users[k] += 1

    def _start(self, k: tuple) -> float:
        siblings = [(s, self.turns[a]) for a, s in self.service.items() if len(a) == len(k) and a[:-1] == k[:-1]]
        if not siblings:
            return 0.0
        least = min(s for s, _ in siblings)
        served = [s for s, turns in siblings if turns]
        return min(least, min(served) - GRANULARITY_S) if served else least

    def leave(self, client) -> None:
        with self.lock:
            for k in prefixes(client):
                self.users[k] -= 1
                if self.users[k] <= 0:
                    for d in (self.users, self.service, self.since, self.turns):
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
