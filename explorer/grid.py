"""Step x position matrices derived from a trace: the data behind every heatmap and the text view.

Rows are forwards (trace records), columns are generated positions [P, end). State codes: 0 masked, 1 decoded
earlier, 2 committed at this step; prompt-tail positions of the first block are not columns.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable

import numpy as np

from engine.records.trace import fields
from explorer.tokens import token_labels

MASKED, DECODED, NEW = 0, 1, 2


_GRIDS: dict[int, "Grid"] = {}   # id(trace) -> its grid, dropped when the trace is collected


@dataclass(eq=False)
class Grid:
    _ref: weakref.ref
    memo: dict = field(default_factory=dict)   # what other modules derive from the grid once (scrub data)

    @property
    def trace(self):
        return self._ref()

    @classmethod
    def of(cls, trace) -> "Grid":
        """The trace's grid, computed once per trace and kept here, beside it (the grid holds the trace weakly, so
        the cache never keeps a trace alive)."""
        g = _GRIDS.get(id(trace))
        if g is None or g.trace is not trace:
            g = _GRIDS[id(trace)] = cls(weakref.ref(trace))
            weakref.finalize(trace, _GRIDS.pop, id(trace), None)
        return g

    @cached_property
    def P(self) -> int:
        return int(self.trace.meta.prompt_len)

    @cached_property
    def end(self) -> int:
        """One past the last position any forward scored (so an EOS early stop does not show empty columns)."""
        last = max((int(max([r.positions.max(initial=-1), *(p.max(initial=-1) for p, _ in r.outside())]))
                    for r in self.trace.records), default=self.P)
        return max(self.P + 1, min(last + 1, int(self.trace.meta.gen_end)))

    @property
    def positions(self) -> np.ndarray:
        return np.arange(self.P, self.end)

    @property
    def n_steps(self) -> int:
        return len(self.trace.records)

    def _fill(self, field: str, fill=np.nan, dtype=np.float32, only_masked: bool = True) -> np.ndarray:
        out = np.full((self.n_steps, self.end - self.P), fill, dtype=dtype)
        for s, r in enumerate(self.trace.records):
            cols = r.positions - self.P
            keep = (cols >= 0) & (cols < out.shape[1])
            if only_masked:
                keep &= r.tokens_before == self.trace.meta.mask_token_id
            out[s, cols[keep]] = np.asarray(getattr(r, field))[keep]
        return out

    def extra(self, contract: type, get: Callable, fill=np.nan, dtype=np.float32) -> np.ndarray:
        """(steps, positions) of a per-position field a decoder adds to its records, read as ``get(fields)`` from
        the records its ``contract`` (its card's) declares (``fill`` where a record lacks it)."""
        out = np.full((self.n_steps, self.end - self.P), fill, dtype=dtype)
        for s, r in enumerate(self.trace.records):
            f = fields(r, contract)
            if f is not None and get(f) is not None:
                cols = r.positions - self.P
                keep = (cols >= 0) & (cols < out.shape[1])
                out[s, cols[keep]] = np.asarray(get(f))[keep]
        return out

    @cached_property
    def tokens(self) -> np.ndarray:
        """(steps, n) token ids after each forward (mask id where still masked)."""
        mask_id = self.trace.meta.mask_token_id
        cur = np.full(self.end - self.P, mask_id, dtype=np.int64)
        out = np.empty((self.n_steps, cur.size), dtype=np.int64)
        for s, r in enumerate(self.trace.records):
            cols = r.positions - self.P
            keep = (cols >= 0) & (cols < cur.size)
            cur[cols[keep]] = r.tokens_after[keep]
            for positions, tokens in r.outside():      # edits to the block before, fills of the slots after
                cur[positions - self.P] = tokens
            out[s] = cur
        return out

    @cached_property
    def state(self) -> np.ndarray:
        mask_id = self.trace.meta.mask_token_id
        st = np.where(self.tokens == mask_id, MASKED, DECODED).astype(np.int8)
        st[self.committed] = NEW
        return st

    @cached_property
    def committed(self) -> np.ndarray:
        return self._with_fills(self._fill("committed", False, bool, only_masked=False), lambda r: True)

    @cached_property
    def reason(self) -> np.ndarray:
        return self._with_fills(self._fill("reason", 0, np.int8, only_masked=False), lambda r: r.fill.fill_reason)

    def _with_fills(self, out: np.ndarray, value) -> np.ndarray:
        """``out`` with the commits a forward made after its block (``fill_positions``) set to ``value(record)``."""
        for s, r in enumerate(self.trace.records):
            fill = r.fill.fill_positions
            if fill is not None:
                out[s, fill - self.P] = value(r)
        return out

    @cached_property
    def confidence(self) -> np.ndarray:
        """Confidence of each still-masked position's candidate at each forward (NaN elsewhere)."""
        return self._fill("confidence")

    @cached_property
    def entropy(self) -> np.ndarray:
        return self._fill("entropy")

    @cached_property
    def candidate(self) -> np.ndarray:
        return self._fill("candidate", -1, np.int64)

    @cached_property
    def commit_step(self) -> np.ndarray:
        """(n,) the step at which each position was committed (-1 if never)."""
        c = self.committed
        return np.where(c.any(0), c.argmax(0), -1)

    @cached_property
    def commit_confidence(self) -> np.ndarray:
        """(n,) confidence of the committed token when it was committed: at its commit step, or, for a commit by a
        verify forward (which scores no draft), at the last draft that scored it."""
        conf = self.confidence
        out = np.full(len(self.commit_step), np.nan, np.float32)
        for j, s in enumerate(self.commit_step):
            seen = np.flatnonzero(~np.isnan(conf[: s + 1, j])) if s >= 0 else []
            if len(seen):
                out[j] = conf[seen[-1], j]
        return out

    @cached_property
    def revisions(self) -> list[tuple[int, int, int, int, int]]:
        """(step, column, Revision code, old token, new token) of every change a revising decoder made."""
        return [(s, p - self.P, code, old, new) for s, p, code, old, new in self.trace.revisions()
                if 0 <= p - self.P < self.end - self.P]

    @cached_property
    def hover(self) -> np.ndarray:
        """(steps, n) hover text per cell: the candidate and its confidence *at that step* while the position was
        masked (and whether the step committed it), else the decoded token."""
        cand, toks = token_labels(self.trace, self.candidate), token_labels(self.trace, self.tokens)
        conf, state, scored = self.confidence, self.state, self.candidate >= 0
        out = np.empty(cand.shape, dtype=object)
        for idx in np.ndindex(*cand.shape):
            if scored[idx]:
                out[idx] = f"candidate {cand[idx]} · p {conf[idx]:.2f}" + (" · committed" if state[idx] == NEW else "")
            elif state[idx] == MASKED:
                out[idx] = "masked (not scored)"
            else:
                out[idx] = f"{toks[idx]} (decoded)"
        return out

    @cached_property
    def labels(self) -> np.ndarray:
        """(n,) column labels "position token" (final token): token strings sent once per position."""
        toks = self.tokens[-1] if self.n_steps else np.zeros(0, np.int64)
        return np.array([f"{p} {t}" for p, t in zip(self.positions, token_labels(self.trace, toks))], dtype=object)

    def block_edges(self) -> list[int]:
        """Column indices where a new block starts (block boundaries to draw)."""
        B = int(self.trace.meta.block_size)
        return [p - self.P for p in range(((self.P // B) + 1) * B, self.end, B)] if B > 1 else []
