"""The pre-baked example runs (``assets/examples/<decoder>.npz``): loaded once when the server starts and shown to
every visitor (the opening run, the tour's stops, Compare's first side, the "views this run leaves out" links).

One object serves every session, so each is frozen (``engine.records.frozen``: read-only arrays, records, metadata,
dicts and lists) and the mapping of them too: a handler that would change one raises where it does, instead of
changing what every later visitor sees (issue 74: a branch of the opening run gave it an S2D2 tab for everyone).
"""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

from engine.records.frozen import freeze
from engine.records.trace import Trace
from engine.tasks import get_task

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "assets" / "examples"
LEAD = ("story", "picks", "arith")


def held_out(task_name: str, n: int = 10) -> list:
    """The held-out problems the page offers for a model's task, as (prompt as shown, problem): a mix's few of each
    of its tasks. The checker knows these prompts, so the pre-baked examples are decoded on them too
    (``tools.experiments.bake_examples``)."""
    task = get_task(task_name)
    # the uncertain tasks lead: on them a decoder's dials change the outcome (arithmetic is decoded with certainty)
    names = sorted(task.weights, key=lambda t: LEAD.index(t) if t in LEAD else len(LEAD)) \
        if hasattr(task, "weights") else []
    parts = [get_task(t) for t in names] or [task]
    per = max(1, n // len(parts))
    return [(p.typed, p) for t in parts for p in t.problems("test", per, seed=0)]


def shared(trace: Trace) -> Trace:
    """A trace as the page shares it: marked as decoded earlier (the speed tile says cached), then frozen."""
    trace.meta.cached = True
    return freeze(trace)


def load_examples(folder: Path = EXAMPLES_DIR) -> MappingProxyType:
    """Decoder -> its example, each frozen, in a read-only mapping."""
    return MappingProxyType({p.stem: shared(Trace.load(p)) for p in sorted(Path(folder).glob("*.npz"))})
