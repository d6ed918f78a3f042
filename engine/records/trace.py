"""Step records and traces: what a decode did, forward by forward, stored as arrays + JSON (never pickle).

A ``StepRecord`` describes one model forward: which block, which positions the forward scored, the tokens before
and after it, what was committed and why, and per position the candidate, its confidence, margin and normalised
entropy. Decoders add their own fields in ``extra`` (arrays of per-position values, or JSON-able scalars/dicts)
without changing the loop. A ``Trace`` is the list of records plus run metadata; it saves to a single ``.npz``
whose JSON metadata sits in a unicode array, so ``np.load(..., allow_pickle=False)`` reads all of it.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field, is_dataclass
from dataclasses import fields as dataclass_fields
from enum import IntEnum
from functools import lru_cache
from pathlib import Path
from typing import TypedDict

import numpy as np

from engine.catalogue.cards import card_reasons, cards
from engine.records.trace_meta import TraceMeta

TRACE_FORMAT = 1


class TraceFormatError(ValueError):
    """Bytes that are not a trace of this format (truncated, garbage, another version)."""


class _BuiltinReason(IntEnum):
    """Why a position was committed at a step (0 = not committed); decoders in their own folders add theirs."""
    NONE = 0
    AR = 1               # block size 1: the only masked position
    THRESHOLD = 2        # confidence cleared tau
    ARGMAX = 3           # the most confident position, forced so every step makes progress
    SCHEDULE = 4         # LLaDA's per-step quota (top-k by score)
    FORCED = 15          # committed by hand at a branch point (engine.runtime.branch)
    SEEN = 16            # a recorded loop's commit (engine.record): seen in the next forward's input, rule unknown
    # 5-12 and 13 on: a decoder's own, on its card (S2D2's accept / resample / fallback, TSPD's four, EB's bound,
    # Prophet's exit, KLASS's stable slots)


Reason = IntEnum("Reason", dict(sorted({**{m.name: m.value for m in _BuiltinReason}, **card_reasons()}.items(),
                                        key=lambda kv: kv[1])), module=__name__)
Reason.__doc__ = _BuiltinReason.__doc__
assert len(Reason) == len(_BuiltinReason) + len(card_reasons()), "a card's reason reuses a name or a code"


class Verdict(IntEnum):
    """S2D2 verify outcome per position of a verify record."""
    UNTOUCHED = 0        # outside the verified span
    ACCEPTED = 1
    RESAMPLED = 2        # first rejection: a token drawn from the residual
    FALLBACK = 3         # committed by the base rule after verification
    PENDING = 4          # in the span, behind the rejection: waits for the next step


class Revision(IntEnum):
    """How a revising decoder changed a token it had already written (0 = unchanged)."""
    NONE = 0
    EDIT = 1             # rewritten: the model now prefers another token (LLaDA2.1's token-to-token edit)
    REMASK = 2           # returned to [MASK] for a later step to fill again (ReMDM)
    WINO_REJECT = 3      # WINO: drafted at the wide threshold, not confirmed at the narrow one, re-masked


MAX_INFLATED = 128 * 2**20    # a trace's arrays, uncompressed (a 1 024-forward run with every view is ~20 MiB)


class TrajectoryClass(IntEnum):
    """TSPD + CE's class of a masked position's trajectory ([PROPOSED]); -1 in a record = not masked."""
    NONE = 0
    CONVERGING = 1
    OSCILLATORY = 2
    STALLED = 3
    STABLE_HIGH = 4


# ---- the record contract: every key a decoder may put in ``StepRecord.extra``, declared once -------------------
class CandidateFields(TypedDict, total=False):
    topk_ids: np.ndarray          # (L, 5) int32: the top-5 candidates per position (every draft forward)
    topk_p: np.ndarray            # (L, 5) float32: their probabilities


class RevisionFields(TypedDict, total=False):
    revised: np.ndarray           # (L,) Revision codes of this forward's changes to written tokens (0 = none)
    revised_from: np.ndarray      # (L,) the token before the change (-1 where unchanged)
    edit_p: np.ndarray            # (L,) p of the model's preferred token at every written slot (NaN elsewhere)
    prev_positions: np.ndarray    # (k,) absolute positions of the previous block edited in this forward
    prev_from: np.ndarray         # (k,) their tokens before
    prev_to: np.ndarray           # (k,) and after


class FillFields(TypedDict, total=False):
    fill_positions: np.ndarray    # (k,) absolute positions after the block that this forward wrote (Prophet's exit
    #                               on a full-attention model fills every [MASK] left, as its reference does)
    fill_to: np.ndarray           # (k,) the tokens written there
    fill_reason: int              # the Reason code of those commits


class RngFields(TypedDict, total=False):
    rng_state: np.ndarray         # (5056,) uint8: the decode's random generator after this forward, on the
    #                               forwards that drew from it (a branch continues the run's stream from here)


class KVCacheFields(TypedDict, total=False):
    kv_fresh: list                # [first, end): positions whose K/V this forward computed (the rest: the block
    #                               start's cache); every record of a run with kv_cache prefix or dual
    drift: float                  # max |Δ logit| of the block's rows against an uncached forward (measure_drift)


# the fields every decoder may emit; each decoder's own are declared on its card (engine.catalogue.cards)
RECORD_CONTRACTS = {"candidates": CandidateFields, "revise": RevisionFields, "kv_cache": KVCacheFields,
                    "rng": RngFields, "fill": FillFields}
RECORD_CONTRACTS.update({f"{n}.{kind}": t for n, c in cards().items() for kind, t in c.records.items()})


@lru_cache(maxsize=None)
def declared(contract: type) -> frozenset:
    """The field names a contract declares: a card's record dataclass (its bases' fields too) or a generic
    TypedDict."""
    return frozenset(f.name for f in dataclass_fields(contract)) if is_dataclass(contract) else \
        frozenset(contract.__annotations__)


EXTRA_FIELDS = frozenset(k for t in RECORD_CONTRACTS.values() for k in declared(t))
GENERIC = tuple(RECORD_CONTRACTS[g] for g in ("candidates", "revise", "kv_cache", "rng", "fill"))   # every record's
GENERIC_FIELDS = frozenset(k for c in GENERIC for k in declared(c))


def payload_fields(decoder: str, kind: str) -> frozenset:
    """The fields of the payload this decoder's card declares for records of this kind (empty: none)."""
    own = RECORD_CONTRACTS.get(f"{decoder}.{kind}")
    return declared(own) if own else frozenset()

ARRAY_FIELDS = ("positions", "tokens_before", "tokens_after", "committed", "reason", "candidate", "confidence",
                "margin", "entropy")
SCALAR_FIELDS = ("block", "step_in_block", "kind", "nfe", "wall_ms")


@dataclass
class StepRecord:
    block: int
    step_in_block: int
    kind: str                    # "draft" | "verify" | "commit"
    positions: np.ndarray        # (q,) absolute positions scored by this forward
    tokens_before: np.ndarray    # (q,)
    tokens_after: np.ndarray     # (q,)
    committed: np.ndarray        # (q,) bool, committed at this step
    reason: np.ndarray           # (q,) Reason codes
    candidate: np.ndarray        # (q,)
    confidence: np.ndarray       # (q,)
    margin: np.ndarray           # (q,)
    entropy: np.ndarray          # (q,)
    nfe: int                     # cumulative forwards after this one
    wall_ms: float
    extra: dict = field(default_factory=dict)
    decoder: str = field(default="", compare=False, repr=False)   # whose card declares its fields (set by Trace)

    @property
    def n_committed(self) -> int:
        return int(self.committed.sum())

    def field(self, name: str, default=None):
        """A decoder-specific value of this record (``RECORD_CONTRACTS``); ``default`` if this decoder or forward
        has none. An undeclared name is a bug, not a missing value."""
        if name not in EXTRA_FIELDS:
            raise KeyError(f"{name!r} is not a declared record field")
        return self.extra.get(name, default)

    def has(self, name: str) -> bool:
        return self.field(name) is not None

    # the generic contracts, read by attribute (``r.topk.topk_ids``; None where this forward has none)
    topk = property(lambda self: Fields(self.extra, declared(CandidateFields)))
    revision = property(lambda self: Fields(self.extra, declared(RevisionFields)))
    kv = property(lambda self: Fields(self.extra, declared(KVCacheFields)))
    rng = property(lambda self: Fields(self.extra, declared(RngFields)))
    fill = property(lambda self: Fields(self.extra, declared(FillFields)))

    def outside(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """(positions, tokens) this forward wrote outside its block: edits to the finished block before it
        (``prev_positions``) and slots after it (``fill_positions``)."""
        return [(self.extra[p], self.extra[t])
                for p, t in (("prev_positions", "prev_to"), ("fill_positions", "fill_to")) if p in self.extra]


def copied(r: StepRecord) -> StepRecord:
    """A plain record with the fields of ``r`` (its arrays and extras shared, not copied), owned by no trace."""
    return StepRecord(**{f.name: getattr(r, f.name) for f in dataclass_fields(StepRecord) if f.name != "decoder"})


class Fields:
    """One record's fields as a contract declares them (a card's dataclass of one decoder's record kind, or a
    generic one): ``f.logit_gap`` reads a declared field (None where this forward has none); an undeclared name is
    an AttributeError, a bug."""
    __slots__ = ("_extra", "_names")

    def __init__(self, extra: dict, names):
        self._extra, self._names = extra, names

    def __getattr__(self, name: str):
        if name.startswith("_") or name not in self._names:
            raise AttributeError(f"{name!r} is not a field this record's contract declares")
        return self._extra.get(name)


def fields(r: StepRecord, *contracts: type) -> Fields | None:
    """The record's fields under the first of ``contracts`` that is its own (its decoder's card declares it for
    the record's kind, or a generic contract), else None (another decoder's record, or another kind)."""
    own = RECORD_CONTRACTS.get(f"{r.decoder}.{r.kind}")
    for c in contracts:      # a shared base (VerifyFields) reads every decoder's payload that extends it
        if c is own or c in GENERIC or (own is not None and is_dataclass(c) and issubclass(own, c)):
            return Fields(r.extra, declared(c))
    return None


def own_records(trace, *contracts: type) -> list[tuple[int, "StepRecord", Fields]]:
    """(index, record, its fields) of every record of the trace that one of ``contracts`` (cards' types)
    declares."""
    return [(s, r, f) for s, r in enumerate(trace.records) if (f := fields(r, *contracts)) is not None]


@dataclass
class Trace:
    meta: TraceMeta           # a dict is taken as the fields it names (tests and old callers)
    records: list[StepRecord]

    def __post_init__(self):
        if not isinstance(self.meta, TraceMeta):
            self.meta = TraceMeta.from_dict(dict(self.meta))
        # a record's fields are read through its decoder's card (``fields``): a new record becomes this trace's;
        # one another trace owns (a branch's view of its base's first steps) is copied, never re-owned, or the
        # other trace would read it as this decoder's (issue 74: a shared example took a branch's S2D2 tab)
        d = self.meta.decoder
        if any(r.decoder not in ("", d) for r in self.records):
            self.records = [r if r.decoder in ("", d) else copied(r) for r in self.records]
        for r in self.records:
            if r.decoder != d:
                r.decoder = d

    # ---- summary -------------------------------------------------------------------------------------------
    @property
    def nfe(self) -> int:
        return self.records[-1].nfe if self.records else 0

    @property
    def nfe_paper(self) -> int:
        """Forwards as the papers count them (``Generation.nfe_paper``); traces older than the field: ``nfe``."""
        return int(self.meta.nfe_paper if self.meta.nfe_paper is not None else self.nfe)

    @property
    def generated_ids(self) -> list[int]:
        return list(self.meta.token_ids)

    @property
    def tpf(self) -> float:
        return len(self.generated_ids) / max(1, self.nfe)

    def revisions(self) -> list[tuple[int, int, int, int, int]]:
        """(record index, absolute position, Revision code, old token, new token) of every change a revising
        decoder made to a written token, in order: the current block's (``revised``) and the previous block's
        (``prev_positions``, always edits)."""
        out = []
        for s, r in enumerate(self.records):
            rv = r.revision
            if rv.prev_positions is not None:
                out += [(s, int(p), int(Revision.EDIT), int(a), int(b))
                        for p, a, b in zip(rv.prev_positions, rv.prev_from, rv.prev_to)]
            if rv.revised is not None:
                codes, old = rv.revised, rv.revised_from
                out += [(s, int(r.positions[i]), int(codes[i]), int(old[i]), int(r.tokens_after[i]))
                        for i in np.flatnonzero(codes)]
        return out

    def token_str(self, tid: int) -> str:
        return self.meta.vocab.get(str(int(tid)), "?")

    # ---- storage -------------------------------------------------------------------------------------------
    def to_arrays(self) -> dict[str, np.ndarray]:
        arrays: dict[str, np.ndarray] = {}
        per_step = []
        extra_keys = sorted({k for r in self.records for k, v in r.extra.items() if isinstance(v, np.ndarray)})
        for name in ARRAY_FIELDS + tuple(f"x.{k}" for k in extra_keys):
            chunks = []
            for r in self.records:
                v = getattr(r, name) if not name.startswith("x.") else r.extra.get(name[2:])
                # extras are stored flat (shapes go to JSON), so their trailing dims may differ step to step
                chunks.append(None if v is None else np.asarray(v).ravel() if name.startswith("x.") else np.asarray(v))
            like = next((c for c in chunks if c is not None), np.zeros(0))
            chunks = [c if c is not None else np.zeros((0,) + like.shape[1:], like.dtype) for c in chunks]
            arrays[name] = np.concatenate(chunks, 0) if chunks else like
            arrays[name + ".off"] = np.cumsum([0] + [len(c) for c in chunks]).astype(np.int64)
        for r in self.records:
            d = {k: getattr(r, k) for k in SCALAR_FIELDS}
            d["extra"] = {k: v for k, v in r.extra.items() if not isinstance(v, np.ndarray)}
            d["shapes"] = {k: list(v.shape) for k, v in r.extra.items() if isinstance(v, np.ndarray)}
            per_step.append(d)
        meta = dict(self.meta.to_dict(), format=TRACE_FORMAT, steps=per_step)
        arrays["__meta__"] = np.array(json.dumps(meta, default=_json_default))
        return arrays

    @classmethod
    def from_arrays(cls, arrays) -> "Trace":
        meta = json.loads(str(arrays["__meta__"]))
        if meta.get("format") != TRACE_FORMAT:
            raise TraceFormatError(f"unsupported trace format {meta.get('format')!r}")
        steps = meta.pop("steps")
        meta.pop("format")
        cols = {}
        for name in arrays.keys():
            if name == "__meta__" or name.endswith(".off"):
                continue
            data, off = arrays[name], arrays[name + ".off"]
            if len(off) != len(steps) + 1:
                raise TraceFormatError(f"trace array {name!r} does not match {len(steps)} steps")
            cols[name] = [data[off[i]:off[i + 1]] for i in range(len(steps))]
        records = []
        for i, s in enumerate(steps):
            extra = dict(s["extra"])
            shapes = s.get("shapes", {})
            extra.update({k[2:]: v[i].reshape(shapes[k[2:]]) for k, v in cols.items()
                          if k.startswith("x.") and k[2:] in shapes})
            records.append(StepRecord(block=s["block"], step_in_block=s["step_in_block"], kind=s["kind"],
                                      nfe=s["nfe"], wall_ms=s["wall_ms"], extra=extra,
                                      **{f: cols[f][i] for f in ARRAY_FIELDS}))
        return cls(meta=TraceMeta.from_dict(meta), records=records)

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        np.savez_compressed(buf, **self.to_arrays())
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, max_inflated: int = MAX_INFLATED) -> "Trace":
        import zipfile
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as zf:   # a forged npz may inflate far past its own size
                if sum(i.file_size for i in zf.infolist()) > max_inflated:
                    raise TraceFormatError(f"not a trace: its arrays inflate past {max_inflated >> 20} MiB")
            with np.load(io.BytesIO(data), allow_pickle=False) as z:
                return cls.from_arrays({k: z[k] for k in z.files})
        except TraceFormatError:
            raise
        except (zipfile.BadZipFile, EOFError, OSError, KeyError, ValueError, TypeError, IndexError) as e:
            raise TraceFormatError(f"not a trace: {type(e).__name__}: {e}") from None

    def save(self, path: str | Path) -> None:
        Path(path).write_bytes(self.to_bytes())

    @classmethod
    def load(cls, path: str | Path) -> "Trace":
        return cls.from_bytes(Path(path).read_bytes())


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON-serialisable: {type(o).__name__}")
