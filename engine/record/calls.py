"""One model call as the recorder reads it: the row of the batch it records, the positions that row holds, its
tokens, and the statistics of its logits at the generated positions, reduced on the model's device by the
engine's own ``token_stats_batch`` (so a recorded confidence is the number Unmask's own decode would show).

What crosses to the host per call: the row's q input ids (and its q position ids, where given) and one
(q, 4 + 2·TOP_K) matrix of statistics; never a row of the vocabulary.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from engine.errors import UserError
from engine.runtime.device import host
from engine.runtime.sampling import TOP_K, token_stats_batch


class RecordError(UserError):
    """A model call the recorder cannot read (the message says what it expected)."""


@dataclass
class Call:
    """What one forward showed: the recorded row's window of the canvas and its statistics there."""
    positions: np.ndarray         # (q,) absolute positions of the row's input
    ids: np.ndarray               # (q,) its tokens (the canvas as the model saw it)
    scored: np.ndarray            # (g,) indices into ``positions`` of the generated positions (>= P) it scored
    candidate: np.ndarray         # (g,) int32
    confidence: np.ndarray        # (g,) float32
    margin: np.ndarray            # (g,)
    entropy: np.ndarray           # (g,)
    topk_ids: np.ndarray          # (g, K) int32
    topk_p: np.ndarray            # (g, K) float32
    wall_ms: float


def input_ids_of(args: tuple, kwargs: dict) -> torch.Tensor:
    """(B, q) the call's token ids: ``input_ids=`` or the first positional argument."""
    ids = kwargs.get("input_ids", args[0] if args else None)
    if not isinstance(ids, torch.Tensor) or ids.dtype not in (torch.long, torch.int, torch.int32, torch.int64):
        raise RecordError("the recorder reads token ids (input_ids): this model was called without them "
                          "(inputs_embeds alone cannot show which slots were masked)")
    return ids if ids.dim() == 2 else ids[None]


def cache_length(kwargs: dict) -> int:
    """Positions already in the call's key/value cache (read before the forward extends it); 0 without one."""
    cache = kwargs.get("past_key_values", kwargs.get("cache"))
    if cache is None or not hasattr(cache, "get_seq_length"):
        return 0
    return int(cache.get_seq_length())


def logits_of(output) -> torch.Tensor:
    """(B, q, V) the call's logits: the output itself, or its ``.logits`` (or its first item, as a tuple)."""
    logits = output if isinstance(output, torch.Tensor) else getattr(output, "logits", None)
    if logits is None and isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
        logits = output[0]
    if not isinstance(logits, torch.Tensor) or logits.dim() not in (2, 3) or not logits.is_floating_point():
        raise RecordError(f"the model's output has no logits to read ({type(output).__name__}: expected a "
                          "tensor (B, q, V) or an object with .logits)")
    return logits if logits.dim() == 3 else logits[None]


def guided(ids: torch.Tensor, mask_id: int, prompt_len: int) -> bool:
    """Whether a batch is classifier-free guidance's doubled batch (LLaDA's generate.py: the conditional rows, then
    the same rows with the prompt masked): an even batch whose second half holds [MASK] over every prompt
    position its first half holds a token at."""
    B = ids.shape[0]
    if B < 2 or B % 2 or prompt_len <= 0 or ids.shape[1] < prompt_len:
        return False
    cond, uncond = ids[: B // 2, :prompt_len], ids[B // 2:, :prompt_len]
    return bool(((uncond == mask_id) & (cond != mask_id)).all())


def pick(rows: torch.Tensor, idx: np.ndarray) -> torch.Tensor:
    """rows[idx] on the rows' device: a view where the indices run consecutively (a window's generated tail)."""
    if int(idx[-1]) - int(idx[0]) == len(idx) - 1:
        return rows[int(idx[0]):int(idx[-1]) + 1]
    return rows[torch.from_numpy(idx)]


def empty_stats() -> tuple:
    K = TOP_K
    return (np.zeros(0, np.int32), *(np.zeros(0, np.float32) for _ in range(3)), np.zeros((0, K), np.int32),
            np.zeros((0, K), np.float32))


class Reader:
    """Reads calls of one model: the row to record (``row``: of the batch, or of its conditional half under
    guidance), the mask id, the prompt length (None: where the first call's first [MASK] stands) and
    ``logit_shift`` (1: position i's logit is at row i − 1, as Dream's)."""

    def __init__(self, mask_id: int, prompt_len: int | None, row: int = 0, guidance: bool | None = None,
                 logit_shift: int = 0):
        self.mask_id, self.P, self.row, self.guidance, self.shift = int(mask_id), prompt_len, row, guidance, logit_shift
        self.width: int | None = None          # the batch the first call had
        self.pending: tuple | None = None      # (positions, ids, t0) of the call in flight
        self.cfg = False

    def before(self, args: tuple, kwargs: dict) -> None:
        """The pre-hook: the recorded row's window (positions from ``position_ids``, else the cache's length)."""
        ids = input_ids_of(args, kwargs)
        B, q = ids.shape
        if self.width is None:
            self._first(ids)
        elif B != self.width:
            raise RecordError(f"the batch changed from {self.width} rows to {B}: record one decode at a time")
        row = self.row
        own = host(ids[row]).numpy().astype(np.int64)                                         # (q,)
        pos = kwargs.get("position_ids")
        if isinstance(pos, torch.Tensor):
            pos = pos if pos.dim() == 1 else pos[min(row, pos.shape[0] - 1)]
            positions = host(pos).numpy().astype(np.int64)
            if len(positions) != q:
                raise RecordError(f"position_ids hold {len(positions)} positions for {q} input ids")
        else:
            positions = np.arange(q, dtype=np.int64) + cache_length(kwargs)
        self.pending = (positions, own, time.perf_counter())

    def _first(self, ids: torch.Tensor) -> None:
        B = ids.shape[0]
        first = host(ids[min(self.row, B - 1)]).numpy()
        masked = np.flatnonzero(first == self.mask_id)
        if not len(masked):
            raise RecordError(f"the first call holds no [MASK] (id {self.mask_id}) in row {self.row}: is the mask "
                              "id right? (the recorder follows a decode from its first masked canvas)")
        if self.P is None:
            self.P = int(masked[0])                  # generate.py's canvas: the prompt, then the masked slots
        self.cfg = guided(ids, self.mask_id, self.P) if self.guidance is None else bool(self.guidance)
        half = B // 2 if self.cfg else B
        if not 0 <= self.row < half:
            raise RecordError(f"row {self.row} is not in the batch ({half} rows"
                              f"{' in its conditional half' if self.cfg else ''})")
        self.width = B

    def after(self, output) -> Call:
        """The forward hook: the pending window's statistics at its generated positions."""
        if self.pending is None:
            raise RecordError("a forward ended without its start being seen (a hook attached mid-call?)")
        positions, ids, t0 = self.pending
        self.pending = None
        logits = logits_of(output)
        if logits.shape[0] != self.width or logits.shape[1] != len(ids):
            raise RecordError(f"the logits ({tuple(logits.shape[:2])}) do not line up with the input "
                              f"({self.width}, {len(ids)})")
        rows = logits[self.row]                                                               # (q, V)
        if self.shift:      # row i holds position i + 1's logit: position j reads row j − 1
            rows, at = rows[:-1], np.arange(1, len(ids))
        else:
            at = np.arange(len(ids))
        scored = at[positions[at] >= self.P]
        if not len(scored):                          # a prefill of the prompt alone: nothing generated to score
            return Call(positions, ids, scored, *empty_stats(), (time.perf_counter() - t0) * 1e3)
        with torch.no_grad():
            st = token_stats_batch([pick(rows, scored - self.shift)], 0.0, 0, 1.0, [None], self.mask_id)[0]
        return Call(positions, ids, scored, st.candidate.numpy().astype(np.int32), st.confidence.numpy(),
                    st.margin.numpy(), st.entropy.numpy(), st.top_ids.numpy().astype(np.int32),
                    st.top_p.numpy().astype(np.float32), (time.perf_counter() - t0) * 1e3)
