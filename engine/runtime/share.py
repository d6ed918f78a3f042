"""Fair share of the engine loop among clients (``engine.runtime.engine_loop``): which decodes run in a round.

- **Places**: ``preempt`` pauses the newest decode of the client holding the most places when the running set is
  full and a client holding at least two fewer waits; ``candidates`` gives a paused decode back its place, before
  its client's new ones, when its share allows.
- **Time**: ``by_time`` pauses, when every place is taken and a decode waits, the decodes that have held their
  place longest once they have held it ``SLICE_S`` (round robin in time, whoever holds them: one heavy decode from
  each of many addresses passes the places rule, which looks only at holdings), and at once (after ``HOLD_S``) a
  decode ``LIGHT`` times the size of a waiting one; ``_admit`` seats the waiting ones first (fewest admissions,
  then the smallest), so a newcomer's light decode waits about one round, however many identities hold the places
  or wait before it (shortest job first among the never served: each of many identities' one heavy decode has
  waited as long as the newcomer, so only its size tells them apart).
- **Memory**: a paused decode keeps its K/V cache; ``pause`` pauses none past ``UNMASK_PAUSED_MB`` of paused caches
  together (the decode then keeps its place until it ends or a place frees).
- **Rows**: ``shared`` picks a round's rows when several clients run: deficit round robin in query tokens, so a
  light client's forward is not as slow as a flood's whole batch.

No torch here: a request's cost is its query tokens (``Forward.ids``; a ``Call`` costs nothing).
"""

from __future__ import annotations

from collections import Counter, deque
from itertools import zip_longest

from engine import settings

SHARE_FLOOR = 64        # query tokens a client is credited at least per shared round (``shared``)
SLICE_S = 1.0           # wall seconds a decode keeps its place while others wait (``by_time``): a light decode
                        # beside 16 heavy ones on a CPU ends well within its first slice
HOLD_S = 0.25           # the least a decode keeps its place before a much lighter one takes it (a round or two)
LIGHT = 4               # a waiting decode this many times smaller than a running one takes its place after HOLD_S


def size_of(item) -> int:
    """A waiting or running decode's size (``Job.size``: its generation length times its canvas, the tokens its
    forwards can read at most; 0 when its caller gave none)."""
    return getattr(item, "handle", item).job.size


def held_bytes(r) -> int:
    """The K/V cache a running or paused decode holds (its pending forward's cache; 0 without one): what a pause
    keeps alive. No torch here: a tensor's ``nbytes`` is read as an attribute."""
    cache = getattr(r.request, "cache", None)
    layers = getattr(cache, "layers", None) or ()
    return sum(getattr(t, "nbytes", 0) for layer in layers for t in (getattr(layer, "keys", None),
                                                                    getattr(layer, "values", None)) if t is not None)


def pause(loop, victim) -> bool:
    """Move ``victim`` from the running set to the paused one, unless the paused decodes' caches would pass
    ``UNMASK_PAUSED_MB`` together (then it keeps its place: False)."""
    budget = settings.get("UNMASK_PAUSED_MB") << 20
    if sum(held_bytes(r) for r in loop.paused) + held_bytes(victim) > budget:
        return False
    loop.running.remove(victim)
    loop.paused.append(victim)
    return True


def first_fitting(queue: deque):
    """A client's oldest waiting decode whose group has room (a group's jobs queue together, so this is nearly
    always the first)."""
    return next((h for h in queue if h.job.group is None or h.job.group.running < h.job.group.limit), None)


def client_of(item) -> str:
    """The client of a waiting ``Handle`` or a running (or paused) decode."""
    return getattr(item, "handle", item).job.client


def candidates(loop) -> list:
    """Per client, what joins next: its oldest paused decode, else its oldest waiting one its group allows."""
    paused = {}
    for r in loop.paused:
        paused.setdefault(client_of(r), r)
    waiting = [h for c, q in loop.queues.items() if c not in paused for h in [first_fitting(q)] if h is not None]
    return list(paused.values()) + waiting


def preempt(loop) -> None:
    """Fair share of the running places. While the running set is full and a client with a decode waiting (new
    or paused) holds at least two places fewer than the client holding the most, that client's newest decode
    pauses here, at the round boundary, and ``_admit`` gives its place to the client with the fewest. A paused
    decode keeps its generator and its pending request (no work is lost) and resumes, before its client's new
    decodes, when its share allows. Its budget clock keeps running while it is paused (wall time from its
    submission, as for a waiting decode): a client that holds more than its share pays for the wait. The
    margin of two keeps two clients from trading one place back and forth every round."""
    with loop.cond:
        wants = Counter({client_of(h): len(loop.queues[client_of(h)]) for h in candidates(loop)
                         if not hasattr(h, "handle")})
    wants.update(client_of(r) for r in loop.paused)
    running = Counter(client_of(r) for r in loop.running)
    free = loop.max_running - len(loop.running)
    while wants and running:
        held = running.__getitem__        # 0 for a client with nothing running (``Counter.get`` would give None)
        top = max(running, key=held)
        below = [c for c in wants if held(c) + 1 < held(top)]
        if not below:
            return
        c = min(below, key=held)
        if free > 0:                                  # a free place: no pause needed for this one
            free -= 1
        else:
            victim = max((r for r in loop.running if client_of(r) == top), key=lambda r: r.handle.submitted)
            if not pause(loop, victim):
                return
            running[top] -= 1
        running[c] += 1
        wants[c] -= 1
        if wants[c] <= 0:
            del wants[c]


def by_time(loop, now: float) -> None:
    """Round robin in time: while the running set is full and clients with nothing running wait (a new decode or a
    paused one), a decode pauses here, one per such client, the longest held first: one that has held its place
    ``SLICE_S``, or ``HOLD_S`` when it is ``LIGHT`` times the size of the smallest of them (shortest job first: a
    light newcomer need not wait out a slice of a heavy decode). It keeps its generator, request and cache, and its
    budget clock runs on (as for ``preempt``). A client whose own decodes wait beside its running ones (a bench's
    batch) is not sliced against itself."""
    if len(loop.running) < loop.max_running:
        return
    busy = {client_of(r) for r in loop.running}
    with loop.cond:
        waiting = [h for h in candidates(loop) if client_of(h) not in busy]
    if not waiting:
        return
    held = sorted(loop.running, key=lambda r: r.seated)            # the longest held first
    expired = [r for r in held if now - r.seated >= SLICE_S][:len(waiting)]
    sizes = [size_of(h) for h in waiting if size_of(h) > 0]        # 0: its caller gave none
    heaviest, smallest = max(size_of(r) for r in loop.running), min(sizes, default=0)
    light = sum(1 for x in sizes if x * LIGHT <= heaviest)          # ``_admit`` seats these first
    early = [r for r in held[len(expired):] if now - r.seated >= HOLD_S and 0 < smallest * LIGHT <= size_of(r)]
    for victim in expired + early[:max(0, min(light, len(waiting)) - len(expired))]:
        pause(loop, victim)


def shared(loop, cost: list[int]) -> list:
    """A round shared by several clients: deficit round robin over clients (Shreedhar and Varghese, 1995) in
    query tokens. Each round every client is credited a quantum, the tokens the lightest client needs for all
    its decodes (at least ``SHARE_FLOOR``; the quanta together within ``round_tokens``), and runs its decodes,
    in rotating order, while their tokens fit its credit; a client whose decodes all ran keeps no credit. So a
    light client's forward shares a round about as small as its own instead of a flood's whole batch, and a
    flood's rows still run as their credit grows (each client its equal share of tokens). Two classes: while
    clients whose decodes are all ``LIGHT`` times smaller than the largest run beside heavy ones, the heavy clients
    share the light ones' quanta between them (``heavy_class``: half of each round each class), so a light visitor's rounds stay
    about twice its own however many identities run heavy decodes beside it; they are short, so the heavy ones
    lose little."""
    rows: dict[str, list[int]] = {}
    for i, r in enumerate(loop.running):
        rows.setdefault(client_of(r), []).append(i)
    need = min(sum(cost[i] for i in mine) for mine in rows.values())
    quantum = max(1, min(max(need, SHARE_FLOOR), loop.round_tokens // len(rows)))
    size = {c: max(size_of(loop.running[i]) for i in mine) for c, mine in rows.items()}
    light = {c for c in rows if 0 < size[c] * LIGHT <= max(size.values())}
    chosen = []
    if light:
        heavy = {c: rows.pop(c) for c in list(rows) if c not in light}
        chosen += heavy_class(loop, heavy, cost, quantum * len(light))
    else:
        loop.heavy_credit = 0
    for c, mine in rows.items():
        loop.deficit[c] += quantum
        k = loop.turns[c] % len(mine)
        ran = 0
        for i in mine[k:] + mine[:k]:
            if cost[i] > loop.deficit[c]:
                break
            chosen.append(i)
            loop.deficit[c] -= cost[i]
            ran += 1
        loop.turns[c] += ran
        if ran == len(mine):
            loop.deficit[c] = 0
    if not chosen:              # no credit covers a row yet: the richest client's next row runs, on credit
        c = max(rows, key=lambda c: loop.deficit[c])
        i = rows[c][loop.turns[c] % len(rows[c])]
        chosen, loop.deficit[c] = [i], loop.deficit[c] - cost[i]
        loop.turns[c] += 1
    return [loop.running[i] for i in sorted(chosen)]


def heavy_class(loop, heavy: dict[str, list[int]], cost: list[int], credit: int) -> list[int]:
    """The heavy clients' rows of a round shared with light ones (``shared``): the class is credited what the light
    clients are, together, and its rows run one client at a time in rotating order while they fit (one credit for
    the class, so seven identities' rows do not all come due in the same round)."""
    loop.heavy_credit += credit
    queue = [i for turn in zip_longest(*heavy.values()) for i in turn if i is not None]
    k = loop.heavy_turn % len(queue)
    out = []
    for i in queue[k:] + queue[:k]:
        if cost[i] > loop.heavy_credit:
            break
        out.append(i)
        loop.heavy_credit -= cost[i]
    loop.heavy_turn += len(out)
    if len(out) == len(queue):
        loop.heavy_credit = 0
    return out
