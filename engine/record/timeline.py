"""From consecutive calls to records: the canvas as each forward saw it, and what changed before the next.

A loop writes between forwards, so forward k's record closes when forward k + 1 shows its input (or the loop's
return value shows the final canvas): a slot that was [MASK] and now holds a token was committed by forward k
(reason ``SEEN``: the rule's own reason is not visible from outside), a written token that changed was revised
(``Revision.EDIT``), one that went back to [MASK] was re-masked (``Revision.REMASK``). A change at a generated
position forward k did not score (outside its window) is kept as a fill (``FillFields``), so the canvas stays
whole.
"""

from __future__ import annotations

import numpy as np

from engine.record.calls import Call, RecordError
from engine.records.trace import Reason, Revision, StepRecord

SEEN = int(Reason.SEEN)


class Timeline:
    """The canvas (n,) the calls show, the open call and the closed records. ``block_size``: the loop's block
    (a record's positions, ``block`` and ``step_in_block`` are read from where the first [MASK] stands); None: one
    block, every generated slot a forward scored kept."""

    def __init__(self, mask_id: int, prompt_len: int, block_size: int | None = None):
        self.mask_id, self.P, self.B = mask_id, prompt_len, block_size
        self.canvas: np.ndarray | None = None       # (n,) int64
        self.open: Call | None = None
        self.records: list[StepRecord] = []
        self._block = (0, -1)                        # (block, step in block) of the latest record

    @property
    def n(self) -> int:
        return 0 if self.canvas is None else len(self.canvas)

    def same_decode(self, call: Call) -> bool:
        """Whether a call continues this decode: its window's prompt positions hold this decode's prompt."""
        if self.canvas is None:
            return True
        pre = call.positions < self.P
        return bool(np.array_equal(call.ids[pre], self.canvas[call.positions[pre]]))

    def add(self, call: Call) -> None:
        """A new forward: it closes the open one (its input is the canvas after the open one's writes)."""
        if call.positions.min(initial=0) < 0:
            raise RecordError("a call's positions are negative")
        if self.canvas is None:
            self.canvas = np.full(int(call.positions.max()) + 1, self.mask_id, np.int64)
            if self.n <= self.P:
                raise RecordError(f"the first call covers {self.n} positions, none after the prompt ({self.P})")
        elif call.positions.max() >= self.n:
            raise RecordError(f"a call reaches position {int(call.positions.max())}, past the canvas of {self.n} "
                              "the first call showed (record a loop over one canvas)")
        after = self.canvas.copy()
        after[call.positions] = call.ids
        if self.open is not None:
            self._close(after)
        self.canvas, self.open = after, call

    def finish(self, final: np.ndarray | None) -> bool:
        """Close the last forward from the loop's return value (the whole canvas, or its generated part); None:
        left as its input was (what it wrote is unknown). Returns whether it was closed from a value."""
        if self.open is None:
            raise RecordError("no forward was recorded: was the model called inside the recorder?")
        after = self.canvas.copy()
        if final is not None:
            final = np.asarray(final, dtype=np.int64).ravel()
            if len(final) == self.n:
                after = final
            elif len(final) == self.n - self.P:
                after[self.P:] = final
            else:
                raise RecordError(f"the loop returned {len(final)} tokens: expected the canvas ({self.n}) or its "
                                  f"generated part ({self.n - self.P})")
        self._close(after)
        self.canvas, self.open = after, None
        return final is not None

    def _where(self, before: np.ndarray) -> tuple[int, int]:
        """(block, step in block) of a forward whose canvas is ``before``: the block of its first [MASK]."""
        masked = np.flatnonzero(before[self.P:] == self.mask_id)
        block = int(masked[0]) // self.B if self.B and len(masked) else self._block[0]
        step = self._block[1] + 1 if block == self._block[0] else 0
        self._block = (block, step)
        return self._block

    def _kept(self, pos: np.ndarray, before: np.ndarray, now: np.ndarray) -> np.ndarray:
        """(g,) bool: the scored positions the record keeps. With a block size, the block's: the B slots from the
        first [MASK] on (every masked slot of the current block lies there), and any slot that changed; so a
        whole-canvas forward's record holds what Unmask's own decoders record, not every later masked slot (the
        page's scrubbing reads every (step, masked slot) a record scored). Without one: every generated slot."""
        if not self.B:
            return np.ones(len(pos), bool)
        masked = np.flatnonzero(self.canvas[self.P:] == self.mask_id)
        lo = self.P + int(masked[0]) if len(masked) else self.n
        return ((pos >= lo) & (pos < lo + self.B)) | (before != now)

    def _close(self, after: np.ndarray) -> None:
        c, m = self.open, self.mask_id
        pos = c.positions[c.scored]                                                     # (g,)
        before, now = c.ids[c.scored], after[pos]
        keep = self._kept(pos, before, now)
        outside = np.ones(self.n, bool)
        outside[pos] = False
        outside[:self.P] = False
        moved = np.flatnonzero(outside & (after != self.canvas))
        pos, before, now = pos[keep], before[keep], now[keep]
        committed = (before == m) & (now != m)
        changed = (before != m) & (now != before)
        revised = np.where(changed, np.where(now == m, int(Revision.REMASK), int(Revision.EDIT)), 0).astype(np.int8)
        extra = dict(topk_ids=c.topk_ids[keep], topk_p=c.topk_p[keep])
        if revised.any():
            extra.update(revised=revised, revised_from=np.where(changed, before, -1).astype(np.int32))
        if len(moved):                       # written where this forward's window did not reach
            extra.update(fill_positions=moved.astype(np.int32), fill_to=after[moved].astype(np.int32),
                         fill_reason=SEEN)
        block, step = self._where(self.canvas)
        self.records.append(StepRecord(
            block=block, step_in_block=step, kind="draft", positions=pos.astype(np.int32),
            tokens_before=before.astype(np.int32), tokens_after=now.astype(np.int32), committed=committed,
            reason=np.where(committed, SEEN, 0).astype(np.int8), candidate=c.candidate[keep],
            confidence=c.confidence[keep], margin=c.margin[keep], entropy=c.entropy[keep], nfe=len(self.records) + 1,
            wall_ms=c.wall_ms, extra=extra))
