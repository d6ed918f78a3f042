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

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "assets" / "examples"


def shared(trace: Trace) -> Trace:
    """A trace as the page shares it: marked as decoded earlier (the speed tile says cached), then frozen."""
    trace.meta.cached = True
    return freeze(trace)


def load_examples(folder: Path = EXAMPLES_DIR) -> MappingProxyType:
    """Decoder -> its example, each frozen, in a read-only mapping."""
    return MappingProxyType({p.stem: shared(Trace.load(p)) for p in sorted(Path(folder).glob("*.npz"))})
