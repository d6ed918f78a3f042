"""Fair share of the engine loop among its flows (``engine.runtime.engine_loop``), by measured cost: who holds the
running places and whose rows run in a round. One rule: the least served first (``engine.runtime.ledger``: the
engine seconds each flow's decodes took, hierarchical over pool, client and session).

- **Seats**: ``_admit`` fills free places with the least served flows' decodes (a flow's paused decode before its
  new ones, ``candidates``). While every place is taken, ``preempt`` pauses, at the round boundary, the decode of
  the most served flow in favour of a waiting flow less served than it, once that decode has held its place for
  ``ledger.GRANULARITY_S`` of engine time (so two flows do not trade a place every round). A newcomer starts a head
  start below the flows that have run (``Ledger.enter``), so it is seated within a round or two
  whatever the others declared or how many identities hold the places; a decode that is slow for its size (many
  steps per token, no cache) is charged what it takes and yields its place accordingly.
- **Memory**: a paused decode keeps its K/V cache and what it keeps between forwards (``held_bytes``, a slot
  cache's row included); ``pause`` pauses none past ``UNMASK_PAUSED_MB`` of paused decodes' bytes together (the
  decode then keeps its place until it ends or a place frees).
- **Device memory** (the byte ledger, ``engine.models.memory``): ``fits`` seats a waiting decode only while its
  need fits the budget beside the decodes held; ``within_budget`` cuts a round to the rows whose bytes fit.
- **Rows**: ``rows`` picks a round's rows when several flows run: those of the flows within
  ``ledger.GRANULARITY_S`` of the least served one, least served first, within ``round_tokens``. A flow far ahead sits out until the others
  catch up, so a light visitor's rounds are not as slow as a flood's whole batch, and flows close to each other
  (a class, a bench) share every round.

No torch here: a request's weight in a round is its query tokens (``Forward.ids``; a ``Call`` weighs one).
"""

from __future__ import annotations

from collections import deque

from engine import settings
from engine.errors import UserError
from engine.runtime import ledger as accounts
from engine.models.memory import LEDGER, request_bytes, scored_elements, stats_reserve


def client_of(item):
    """The flow of a waiting ``Handle`` or a running (or paused) decode (``Job.client``)."""
    return getattr(item, "handle", item).job.client


def held_bytes(r) -> int:
    """What a running or paused decode holds on the device, which a pause keeps alive: its K/V cache (a slot
    cache's row in its pool, ``SlotPool.row_bytes``; a growing cache's tensors) and what it keeps between forwards
    (the byte ledger's ``decodes`` account of the runner that made its pending request: growing caches included).
    No torch here: a tensor's ``nbytes`` is read as an attribute."""
    cache = getattr(r.request, "cache", None)
    row = cache.pool.row_bytes() if hasattr(cache, "pool") and hasattr(cache, "row") else 0
    owner = getattr(r.request, "owner", None)
    if owner is not None:
        return row + LEDGER.owned("decodes", owner)
    layers = getattr(cache, "layers", None) or ()
    tensors = [t for x in layers for t in (getattr(x, "keys", None), getattr(x, "values", None)) if t is not None]
    return row + sum(getattr(t, "nbytes", 0) for t in tensors)


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
    """A flow's oldest waiting decode whose group has room (a group's jobs queue together, so this is nearly
    always the first)."""
    return next((h for h in queue if h.job.group is None or h.job.group.running < h.job.group.limit), None)


def candidates(loop) -> list:
    """Per flow, what joins next: its oldest paused decode, else its oldest waiting one its group allows."""
    paused = {}
    for r in loop.paused:
        paused.setdefault(client_of(r), r)
    waiting = [h for c, q in loop.queues.items() if c not in paused for h in [first_fitting(q)] if h is not None]
    return list(paused.values()) + waiting


def preempt(loop) -> None:
    """While every place is taken: for each waiting flow, least served first, the running decode of the most served
    flow that is served more than it (the newest of that flow's) pauses, if it has held its place for
    ``ledger.GRANULARITY_S`` of engine time; ``_admit`` then seats the least served. A paused decode keeps its
    generator, its pending request and its cache (no work is lost) and resumes, before its flow's new decodes, when
    it is the least served again. Its budget clock keeps running (wall time from submission, as for a waiting decode). A
    flow's own decodes never pause for each other (a bench's batch keeps its order)."""
    if len(loop.running) < loop.max_running:
        return
    key = loop.ledger.key
    with loop.cond:
        waiting = sorted((client_of(h) for h in candidates(loop)), key=key)
    taken: set = set()
    for flow in waiting:
        worse = [r for r in loop.running if id(r) not in taken and r.tenure >= accounts.GRANULARITY_S
                 and loop.ledger.ahead(client_of(r), flow)]
        if not worse:
            return                          # a flow served more than this one finds none either
        victim = max(worse, key=lambda r: (key(client_of(r)), r.handle.submitted))
        if not pause(loop, victim):
            return
        taken.add(id(victim))


def rows(loop, cost: list[int]) -> list:
    """A round shared by several flows: the rows of the flows within ``ledger.GRANULARITY_S`` of the least served
    running flow, least served first, while their query tokens fit ``round_tokens`` (at least one row)."""
    flows: dict = {}
    for i, r in enumerate(loop.running):
        flows.setdefault(client_of(r), []).append(i)
    ledger = loop.ledger
    best = min(flows, key=ledger.key)
    near = sorted((f for f in flows if ledger.lag(f, best) < accounts.GRANULARITY_S), key=ledger.key)
    chosen, used = [], 0
    for f in near:
        for i in flows[f]:
            if chosen and used + cost[i] > loop.round_tokens:
                continue
            chosen.append(i)
            used += cost[i]
    return [loop.running[i] for i in sorted(chosen)]


def charge(loop, chosen: list, cost: list[int], round_s: float, own_s: dict) -> None:
    """Each decode of the round is charged its share of the round's time, by its query tokens (a ``Call`` weighs
    one), plus the time its own rule took (``own_s``, by decode); its flow's accounts accrue it."""
    weights = [max(1, c) for c in cost]
    total = sum(weights)
    for r, w in zip(chosen, weights):
        spent = round_s * w / total + own_s.get(id(r), 0.0)
        r.tenure += spent
        loop.ledger.charge(client_of(r), spent)


def within_budget(loop, chosen: list) -> list:
    """The chosen decodes whose requests' round bytes (``memory.request_bytes``: logits and softmax) fit what the
    byte ledger has left beside the statistics' temporaries (``stats_reserve``, once a round), in order (at least
    one: the others wait a round); ``loop.round_bytes`` counts them, so the round's peak is in the ledger while it
    runs, and ``loop.round_reserve`` keeps the temporaries set aside when seating decodes (``fits``)."""
    forwards = [r.request for r in chosen if hasattr(r.request, "ids")]     # a Call first: Forwards may follow
    reserve = loop.round_reserve = stats_reserve(forwards[0].adapter.device, scored_elements(forwards)) \
        if forwards else 0
    budget = LEDGER.budget()                 # unbounded (a CPU by default): nothing to read of the ledger
    left, keep, used = (LEDGER.left() if budget < float("inf") else budget) - reserve, [], reserve
    for r in chosen:
        b = request_bytes(r.request)
        if keep and used - reserve + b > left:
            continue
        keep.append(r)
        used += b
    loop.round_bytes = used
    return keep


def fits(loop, h, out: list) -> bool:
    """Whether a waiting decode ``h`` may start under the byte ledger's budget: the model's own accounts (pools,
    graphs, buffers), the needs of the decodes the loop holds and its own (``Job.need``; unknown: while the ledger
    is within its budget). Else it waits, unless nothing else runs (one decode always may); one whose need passes
    the budget beside the model's own accounts ends with one line."""
    budget, need = LEDGER.budget(), h.job.need
    if budget == float("inf"):               # a CPU by default: nothing to refuse, no ledger to walk
        return True
    acc = LEDGER.accounts()
    own = sum(v for k, v in acc.items() if k not in ("decodes", "round"))
    admitted = [x for x in out if hasattr(x, "job")]          # waiting decodes seated this step (not paused ones)
    if need and own + need > budget:
        loop.queues[h.job.client].remove(h)
        loop._finish(h, error=UserError(
            f"this decode needs {need / 2 ** 20:.0f} MiB of device memory at once and the budget (UNMASK_STATIC_MB) "
            f"leaves {(budget - own) / 2 ** 20:.0f} MiB beside the model's own buffers: try a shorter prompt, fewer "
            "new tokens or a smaller block"))
        return False
    own += loop.round_reserve                # set aside for the running rounds' statistics, not in the refusal
    if not loop.running and not admitted:
        return True
    held = sum(x.handle.job.need for x in loop.running + loop.paused) + sum(x.job.need for x in admitted)
    return (own + held + need if need else LEDGER.used()) <= budget

