"""The recorder: forward hooks on a language model that turn the generate loop around it into an Unmask trace.

    with Recorder(model, mask_id=126336, prompt_len=len(prompt_ids), tokenizer=tok, loop="generate",
                  args=dict(steps=128, gen_length=128, block_length=32)) as rec:
        out = generate(model, prompt, steps=128, gen_length=128, block_length=32)
        rec.finish(out)
    rec.save("run.npz")          # python app.py --trace run.npz

A pre-hook reads the recorded row's window of the canvas (its token ids, its positions from ``position_ids`` or
the key/value cache's length); a forward hook reduces its logits on the device to a ``StepRecord``'s statistics
(``engine.record.calls``); consecutive windows give what each forward committed or revised
(``engine.record.timeline``). Nothing is changed in the model's output: the loop decodes as it does unrecorded.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from engine.record.calls import Reader, RecordError, logits_of
from engine.record.timeline import Timeline
from engine.records.trace import Trace
from engine.records.trace_meta import TraceMeta

DECODER = "recorded"        # the trace's decoder name: a loop seen from outside, not one of Unmask's rules


class Recorder:
    """Records one decode of ``model`` (any ``torch.nn.Module`` whose output is logits or has ``.logits``).

    mask_id: the [MASK] token id. prompt_len: P (None: where the first call's first [MASK] stands). tokenizer:
    optional, for the text and the token strings. row: the batch row to record (of the conditional half under
    classifier-free guidance, ``guidance``: None = detect LLaDA's doubled batch). block_size: the loop's block, for
    the records' block labels. logit_shift: 1 where position i's logit is read at row i − 1 (Dream).
    name, loop, args: what ``meta`` says of the model, the loop and its arguments. one_decode: a second decode
    (another prompt) ends the recording quietly instead of being refused; quiet: a call it cannot read stops the
    recording (``failed`` says why) instead of raising into the loop (both for the ``record`` command's hook,
    which leaves the script to run as it would)."""

    def __init__(self, model: torch.nn.Module, mask_id: int, prompt_len: int | None = None, tokenizer=None,
                 row: int = 0, guidance: bool | None = None, block_size: int | None = None, logit_shift: int = 0,
                 name: str | None = None, loop: str = "", args: dict | None = None, one_decode: bool = False,
                 quiet: bool = False):
        if not isinstance(model, torch.nn.Module):
            raise RecordError(f"the recorder attaches to a torch.nn.Module, not a {type(model).__name__}")
        if isinstance(mask_id, bool) or not isinstance(mask_id, int) or mask_id < 0:
            raise RecordError(f"mask_id must be a token id (a non-negative int), not {mask_id!r}")
        self.model, self.tokenizer, self.loop, self.args = model, tokenizer, loop, dict(args or {})
        self.name = name or getattr(getattr(model, "config", None), "_name_or_path", "") or type(model).__name__
        self.reader = Reader(mask_id, prompt_len, row, guidance, logit_shift)
        self.block_size, self.one_decode, self.quiet = block_size, one_decode, quiet
        self.failed: str | None = None
        self.timeline: Timeline | None = None
        self.closed = False          # the last forward closed from the loop's return value
        self.done = False            # finished (or a second decode began, under one_decode)
        self._hooks: list = []
        self._t0 = self._t1 = 0.0
        self._where = ("", "")       # the logits' device and dtype

    # ---- hooks -----------------------------------------------------------------------------------------------
    def __enter__(self) -> "Recorder":
        self.attach()
        return self

    def __exit__(self, *exc) -> None:
        self.detach()

    def attach(self) -> None:
        self._t0 = time.perf_counter()
        self._hooks = [self.model.register_forward_pre_hook(self._before, with_kwargs=True),
                       self.model.register_forward_hook(self._after, always_call=False)]

    def detach(self) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks = []
        if not self._t1:
            self._t1 = time.perf_counter()

    def _before(self, module, args, kwargs):
        if not self.done:
            self._guarded(self.reader.before, args, kwargs)

    def _after(self, module, args, output):
        if not self.done and self.reader.pending is not None:
            self._guarded(self._read, output)

    def _guarded(self, fn, *args) -> None:
        try:
            fn(*args)
        except RecordError as e:
            if not self.quiet:
                raise
            self.failed, self.done = str(e), True

    def _read(self, output) -> None:
        call = self.reader.after(output)
        if self.timeline is None:
            self.timeline = Timeline(self.reader.mask_id, self.reader.P, self.block_size)
            logits = logits_of(output)
            self._where = (str(logits.device), str(logits.dtype).removeprefix("torch."))
        elif not self.timeline.same_decode(call):
            if not self.one_decode:
                raise RecordError("the prompt changed between forwards: a second decode began (record one "
                                  "decode per Recorder)")
            self.finish(None)
            return
        self.timeline.add(call)

    # ---- the end ---------------------------------------------------------------------------------------------
    def finish(self, output=None) -> Trace:
        """Close the last forward from the loop's return value (token ids: the whole canvas or its generated part,
        a batch whose recorded row is taken, or None: the last forward's writes stay unknown) and stop recording."""
        if self.timeline is None:
            raise RecordError("no forward was recorded: was the model called inside the recorder?")
        if not self.done:
            self.closed = self.timeline.finish(self._row_of(output))
            self.done, self._t1 = True, time.perf_counter()
        return self.trace()

    def _row_of(self, output) -> np.ndarray | None:
        if output is None:
            return None
        if isinstance(output, torch.Tensor):
            output = output.detach().cpu().numpy()
        try:
            ids = np.asarray(output, dtype=np.int64)
        except (TypeError, ValueError):
            raise RecordError(f"the loop's result is not token ids ({type(output).__name__})") from None
        return ids[min(self.reader.row, len(ids) - 1)] if ids.ndim == 2 else ids      # a batch: the recorded row

    def trace(self) -> Trace:
        if self.timeline is None or not self.timeline.records:
            raise RecordError("no forward was recorded: was the model called inside the recorder?")
        return Trace(meta=self._meta(), records=list(self.timeline.records))

    def save(self, path: str | Path) -> Trace:
        tr = self.trace() if self.done else self.finish(None)
        tr.save(path)
        return tr

    def _meta(self) -> TraceMeta:
        tl, tok, P = self.timeline, self.tokenizer, self.reader.P
        canvas = tl.canvas
        stop_ids = [int(tok.eos_token_id)] if getattr(tok, "eos_token_id", None) is not None else []
        gen = [int(t) for t in canvas[P:]]
        end = next((i + 1 for i, t in enumerate(gen) if t in stop_ids), None)
        ids = gen[:end] if end is not None else [t for t in gen if t != tl.mask_id]
        nfe = len(tl.records)
        return TraceMeta(
            model=str(self.name), model_type=str(getattr(getattr(self.model, "config", None), "model_type", "")),
            prompt=decode(tok, canvas[:P]), prompt_ids=[int(t) for t in canvas[:P]], prompt_len=P, gen_end=tl.n,
            decoder=DECODER, params={k: v for k, v in self.args.items() if is_plain(v)},
            seed=seed if isinstance(seed := self.args.get("seed"), int) and not isinstance(seed, bool) else 0,
            block_size=int(self.block_size or tl.n - P), nfe=nfe, nfe_paper=nfe, nfe_by_kind={"draft": nfe},
            wall_s=self._t1 - self._t0, token_ids=ids, text=decode(tok, ids), final_tokens=canvas.tolist(),
            generated_tokens=len(ids), mask_token_id=tl.mask_id, stop_ids=stop_ids, vocab=vocab_of(tok, tl),
            attention="", cache="", device=self._where[0], dtype=self._where[1],
            engine_version=__import__("engine").__version__,
            summary=dict(recorded=dict(loop=self.loop, row=self.reader.row, guidance=self.reader.cfg,
                                       closed=self.closed)))


def is_plain(v) -> bool:
    """A value JSON keeps as it is (the caller's arguments saved in ``meta.params``)."""
    return v is None or isinstance(v, (bool, int, float, str)) or (
        isinstance(v, (list, tuple)) and all(is_plain(x) for x in v))


def decode(tok, ids) -> str:
    return tok.decode([int(t) for t in ids], skip_special_tokens=True) if tok is not None else ""


def vocab_of(tok, tl: Timeline) -> dict:
    """str(id) -> token string for every id the trace mentions (the id itself without a tokenizer)."""
    seen = {int(t) for t in tl.canvas} | {tl.mask_id}
    for r in tl.records:
        seen |= set(r.candidate.tolist()) | set(np.ravel(r.extra["topk_ids"]).tolist()) | set(r.tokens_before.tolist())
    seen = sorted(t for t in seen if t >= 0)
    if tok is None:
        return {str(t): f"<{t}>" if t == tl.mask_id else str(t) for t in seen}
    names = tok.convert_ids_to_tokens(seen)
    return {str(t): s if s is not None else "?" for t, s in zip(seen, names)}
