"""A trace's run metadata, declared: every field the loop writes, the decoder's own summary beside them, and what
the page notes about the run it shows. Saved flat in the trace's JSON (``Trace.to_arrays``), versioned by the
trace format; a trace saved before a field existed loads with that field's default.

Code reads fields as attributes only (``meta.nfe``); the decoder's own totals (its ``Policy.summary``: S2D2's
accepted tokens, SimSD's forwards per model, ...) are saved in ``meta.summary`` and read as its card's typed
``RunSummary`` with ``meta.own(SimSDSummary)``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import TypeVar

from engine.catalogue.cards import cards

S = TypeVar("S")


@dataclass
class TraceMeta:
    # the run
    model: str = ""                     # the model's name (the page's short name on the page)
    model_type: str = ""                # its family
    prompt: str = ""
    prompt_ids: list = field(default_factory=list)
    prompt_len: int = 0                 # P: the first generated position
    gen_end: int = 0                    # one past the last position the run may generate
    decoder: str = ""
    params: dict = field(default_factory=dict)   # the decoder's parameters, as the catalogue names them
    seed: int = 0
    block_size: int = 1
    # what it cost
    nfe: int = 0                        # Unmask's forwards
    nfe_paper: int | None = None        # forwards as the reference implementations count them
    nfe_by_kind: dict = field(default_factory=dict)
    wall_s: float = 0.0                 # the engine's own time (rendering and waiting not counted)
    engine_s: float | None = None       # on the engine loop: its share of the rounds (each round's time split)
    shared: float | None = None         # on the engine loop: decodes per round, on average over its rounds
    # what it wrote
    token_ids: list = field(default_factory=list)
    text: str = ""
    final_tokens: list = field(default_factory=list)
    generated_tokens: int = 0
    stopped_at: int | None = None       # the position of the stop token, if it stopped early
    # the model's vocabulary as the run needs it
    mask_token_id: int = 0
    stop_ids: list = field(default_factory=list)
    vocab: dict = field(default_factory=dict)    # str(id) -> token string, for every id the trace mentions
    unknown_words: list = field(default_factory=list)
    # where it ran
    attention: str = ""                 # "block_causal", "full" or "canvas"
    cache: str = ""
    device: str = ""
    dtype: str = ""
    engine_version: str = ""
    forward_path: dict = field(default_factory=dict)   # how its forwards ran: "cuda graph", "static eager",
    #                                                    "eager" or "eager: <why not static>" -> count
    compiled: str = "eager"             # "compiled", "compiled k of n forwards" or "eager[: why]" (UNMASK_COMPILE)
    # the decoder's own summary (Policy.summary)
    summary: dict = field(default_factory=dict)
    # a branch of another run (engine.runtime.branch): its base, step, change and rebuild forwards
    branch: dict | None = None
    # what the page notes about the run it shows
    run_id: str | None = None
    finished: bool = True
    limit: str | None = None            # the request limit that stopped it early
    cached: bool = False                # taken from the trace cache (or pre-baked): decoded earlier, not now

    @classmethod
    def from_dict(cls, d: dict) -> "TraceMeta":
        names = _NAMES
        known = {k: v for k, v in d.items() if k in names and k != "summary"}
        rest = {k: v for k, v in d.items() if k not in names}
        return cls(**known, summary={**d.get("summary", {}), **rest})

    def own(self, summary_type: type[S]) -> S | None:
        """The run's own totals as ``summary_type`` (a card's ``RunSummary`` or a base of it, such as
        ``SpeculativeSummary``) when this run's decoder declares that type or a subclass of it, else None; a field
        the saved trace lacks (saved before it existed) takes its default."""
        card = cards().get(self.decoder)
        declared = card.summary_type if card else None
        if declared is None or not issubclass(declared, summary_type):
            return None
        return summary_type(**{f.name: self.summary[f.name] for f in fields(summary_type) if f.name in self.summary})

    def to_dict(self) -> dict:
        """Flat: the fields, then the decoder's summary keys beside them (as saved)."""
        d = asdict(self)
        return {**{k: v for k, v in d.items() if k != "summary"}, **d["summary"]}


_NAMES = frozenset(f.name for f in fields(TraceMeta))
