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
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path

import numpy as np

TRACE_FORMAT = 1


class Reason(IntEnum):
    """Why a position was committed at a step (0 = not committed)."""
    NONE = 0
    AR = 1               # block size 1: the only masked position
    THRESHOLD = 2        # confidence cleared tau
    ARGMAX = 3           # the most confident position, forced so every step makes progress
    SCHEDULE = 4         # LLaDA's per-step quota (top-k by score)
    ACCEPT = 5           # S2D2: draft token accepted by the verifier
    RESAMPLE = 6         # S2D2: first rejected position, resampled from the residual
    FALLBACK = 7         # S2D2: committed by the base rule after (or instead of) verification
    TSPD = 8             # TSPD controller said "converged"
    CE_LOOKAHEAD = 9     # Kalman forecast's lower bound clears tau within the horizon
    STABILISED = 10      # oscillating token fixed from its window-averaged distribution
    FORCED_PROGRESS = 11  # nothing qualified; the best-scored position is committed


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

    @property
    def n_committed(self) -> int:
        return int(self.committed.sum())


@dataclass
class Trace:
    meta: dict
    records: list[StepRecord]

    # ---- summary -------------------------------------------------------------------------------------------
    @property
    def nfe(self) -> int:
        return self.records[-1].nfe if self.records else 0

    @property
    def generated_ids(self) -> list[int]:
        return list(self.meta.get("token_ids", []))

    @property
    def tpf(self) -> float:
        return len(self.generated_ids) / max(1, self.nfe)

    def token_str(self, tid: int) -> str:
        return self.meta["vocab"].get(str(int(tid)), "?")

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
        meta = dict(self.meta, format=TRACE_FORMAT, steps=per_step)
        arrays["__meta__"] = np.array(json.dumps(meta, default=_json_default))
        return arrays

    @classmethod
    def from_arrays(cls, arrays) -> "Trace":
        meta = json.loads(str(arrays["__meta__"]))
        if meta.get("format") != TRACE_FORMAT:
            raise ValueError(f"unsupported trace format {meta.get('format')!r}")
        steps = meta.pop("steps")
        cols = {}
        for name in arrays.keys():
            if name == "__meta__" or name.endswith(".off"):
                continue
            data, off = arrays[name], arrays[name + ".off"]
            if len(off) != len(steps) + 1:
                raise ValueError(f"trace array {name!r} does not match {len(steps)} steps")
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
        return cls(meta=meta, records=records)

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        np.savez_compressed(buf, **self.to_arrays())
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> "Trace":
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            return cls.from_arrays({k: z[k] for k in z.files})

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
