"""The ``record`` command's hook, inside the recorded script's process: nothing in the script is edited.

``python -m engine record`` runs the script with ``engine/record/boot`` first on ``PYTHONPATH``, whose
``sitecustomize`` calls ``install`` when ``UNMASK_RECORD`` (JSON, set by the command) is present. ``install``
patches ``transformers.PreTrainedModel.__call__`` as soon as transformers' modeling module is imported (an import
hook: the script's own imports are untouched until then): the first model called with token ids holding the mask
id (``--mask-id``, else the model's ``config.mask_token_id``) gets a ``Recorder``; its inner modules (the base
model a ``...ForCausalLM`` calls) are never recorded, being called inside it. The first ``tokenizer.decode`` or
``batch_decode`` of the canvas (or of its generated part) afterwards closes the last forward, as ``finish`` does;
at exit the trace is saved to ``--out`` and a one-line status written for the command (what goes wrong in the
recording, the trace's write included, goes into that status, never into the script). ``install`` takes
``UNMASK_RECORD`` out of the environment, so the script's own Python children (multiprocessing workers) are not
recorded; sibling processes (a shell script's several ``python`` calls) each see it: one that recorded nothing
leaves an earlier status alone.
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.util
import json
import os
import sys

ENV = "UNMASK_RECORD"
TARGET = "transformers.modeling_utils"


class State:
    """The run's one recording: its settings (the command's JSON) and the recorder once a model is found."""

    def __init__(self, cfg: dict):
        self.cfg, self.recorder = cfg, None
        self.mask_ids: dict = {}          # id(model) -> (its mask id or None, its tokenizer or None)

    def mask_id_of(self, model) -> tuple:
        """(mask id, tokenizer): ``--mask-id``, else the model's config's, else its tokenizer's (from the model's
        own folder, looked up once per model)."""
        if id(model) not in self.mask_ids:
            tok = tokenizer_of(model)
            mask_id = self.cfg.get("mask_id")
            for source in (getattr(model, "config", None), tok):
                if mask_id is None:
                    mask_id = getattr(source, "mask_token_id", None)
            self.mask_ids[id(model)] = (mask_id, tok)
        return self.mask_ids[id(model)]

    def maybe_attach(self, model, args: tuple, kwargs: dict) -> None:
        import torch
        from engine.record.recorder import Recorder
        ids = kwargs.get("input_ids", args[0] if args else None)
        if not isinstance(ids, torch.Tensor) or ids.is_floating_point():
            return
        mask_id, tok = self.mask_id_of(model)
        if not isinstance(mask_id, int) or not bool((ids == mask_id).any()):
            return
        c = self.cfg
        self.recorder = Recorder(model, mask_id, c.get("prompt_len"), tok, row=c.get("row", 0),
                                 block_size=c.get("block_size"), logit_shift=c.get("logit_shift", 0),
                                 loop=c.get("loop", ""), args=dict(argv=c.get("argv", [])), one_decode=True,
                                 quiet=True)
        self.recorder.attach()

    def decoded(self, ids) -> None:
        """A tokenizer decoding the canvas or its generated part after the last forward: the loop's result."""
        rec = self.recorder
        if rec is None or rec.done or rec.timeline is None or rec.timeline.open is None:
            return
        try:
            import numpy as np
            import torch
            from engine.record.calls import RecordError
            arr = ids.detach().cpu().numpy() if isinstance(ids, torch.Tensor) else np.asarray(ids)
            if arr.dtype == object or arr.ndim not in (1, 2) or arr.size == 0:
                return
            row = arr[min(rec.reader.row, len(arr) - 1)] if arr.ndim == 2 else arr
            tl = rec.timeline
            if len(row) in (tl.n, tl.n - tl.P) and not (row == tl.mask_id).any():
                try:
                    rec.finish(row)
                except RecordError as e:                 # the recording's failure, for the status: not the script's
                    rec.failed, rec.done = str(e), True
        except (ValueError, TypeError):
            return                                       # not token ids this recording can read

    def write(self) -> None:
        """At exit: the trace to ``out`` and the status line for the command."""
        from engine.errors import UserError
        rec, status, mode = self.recorder, {}, "w"
        try:
            if rec is None:
                raise UserError("no model was called with the mask id in its input (give --mask-id, or check "
                                "that the script builds a transformers model)")
            if rec.failed:
                raise UserError(rec.failed)
            tr = rec.save(self.cfg["out"])
            status = dict(nfe=tr.nfe, closed=rec.closed, tokens=tr.meta.generated_tokens)
        except UserError as e:
            status, mode = dict(error=str(e)), "x" if rec is None else "w"    # nothing seen: a sibling's stands
        except OSError as e:                             # the trace's folder gone, the disk full
            status = dict(error=f"the trace could not be written: {e}")
        try:
            with open(self.cfg["status"], mode) as f:
                json.dump(status, f)
        except FileExistsError:
            pass


def tokenizer_of(model):
    """The model's tokenizer from its own folder (local files only), for the trace's text; None if none."""
    path = getattr(getattr(model, "config", None), "_name_or_path", "")
    if not path:
        return None
    try:
        from transformers import AutoTokenizer
        return AutoTokenizer.from_pretrained(path, local_files_only=True, trust_remote_code=False)
    except (OSError, ValueError, KeyError, TypeError):
        return None


STATE: State | None = None


def patch(mod) -> None:
    """``PreTrainedModel.__call__`` looks for the model to record, then calls as before; the tokenizers' decode
    reports what they decode."""
    cls = mod.PreTrainedModel
    call = cls.__call__

    def __call__(self, *args, **kwargs):
        if STATE is not None and STATE.recorder is None:
            STATE.maybe_attach(self, args, kwargs)
        return call(self, *args, **kwargs)
    cls.__call__ = __call__
    from transformers.tokenization_utils_base import PreTrainedTokenizerBase as Tok
    for name in ("decode", "batch_decode"):
        original = getattr(Tok, name)

        def decode(self, *a, _original=original, **kw):
            if STATE is not None and (a or kw):
                STATE.decoded(a[0] if a else kw.get("token_ids", kw.get("sequences")))
            return _original(self, *a, **kw)
        setattr(Tok, name, decode)


class PatchOnImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """An import hook for one module: it loads as usual, then ``patch`` runs on it."""

    def find_spec(self, name, path=None, target=None):
        if name != TARGET:
            return None
        sys.meta_path.remove(self)                       # the real finder, found without this one
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        self.inner = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        sys.meta_path.remove(self)
        patch(module)


def install() -> None:
    """From ``sitecustomize``: the settings from ``UNMASK_RECORD``, the import hook, the write at exit."""
    global STATE
    STATE = State(json.loads(os.environ.pop(ENV)))     # this process's: its children are not recorded
    if TARGET in sys.modules:
        patch(sys.modules[TARGET])
    else:
        sys.meta_path.insert(0, PatchOnImport())
    atexit.register(STATE.write)
