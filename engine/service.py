"""A decode service for front ends: loads models once (thread-safe), validates user input, streams traces.

Everything a UI needs from the engine goes through here, so the UI never touches torch. Errors a user can cause
(empty or oversized prompt, unknown model, bad parameter) raise ``UserError`` with a message meant for display.
"""

from __future__ import annotations

import threading
from typing import Iterator

import torch

from engine.bench import run_bench
from engine.decoders import build_decoder, parse_spec
from engine.loop import ConfigError, Generation
from engine.model import ModelLoadError, load_model
from engine.trace import Trace

MAX_PROMPT_CHARS = 2000


class UserError(ValueError):
    """Bad input from a person: shown as-is in the UI or CLI; the server keeps serving."""


class DecodeService:
    def __init__(self, default_model: str = "tiny", device: str | None = None, threads: int | None = None):
        self.default_model, self.device = default_model, device
        self._models: dict[str, object] = {}
        self._lock = threading.Lock()
        if threads:
            torch.set_num_threads(threads)

    def model(self, name: str | None = None):
        key = name or self.default_model
        with self._lock:
            if key not in self._models:
                try:
                    self._models[key] = load_model(key, device=self.device)
                except ModelLoadError as e:
                    raise UserError(str(e)) from None
            return self._models[key]

    def model_id(self, name: str | None = None) -> str:
        """Model name plus a revision fingerprint: part of every trace cache key."""
        a = self.model(name)
        return f"{a.name}@{a.info.get('revision', '?')}"

    def check_prompt(self, prompt: str | None) -> str:
        text = (prompt or "").strip()
        if not text:
            raise UserError("The prompt is empty: type a question or pick an example.")
        if len(text) > MAX_PROMPT_CHARS:
            raise UserError(f"The prompt has {len(text)} characters; the limit is {MAX_PROMPT_CHARS}.")
        return text

    def generation(self, prompt: str, decoder: str, params: dict, model: str | None = None) -> Generation:
        text = self.check_prompt(prompt)
        try:
            policy = build_decoder(decoder, **params)
            return Generation(self.model(model), text, policy)
        except ConfigError as e:
            raise UserError(str(e)) from None

    def stream(self, prompt: str, decoder: str, params: dict, model: str | None = None) -> Iterator[Trace]:
        """Yield a partial trace after each forward; the last one yielded is the complete trace.

        Each partial is held back one forward, so the final forward is reported once, by the complete trace
        (which alone carries the EOS stop position and the full wall time)."""
        gen = self.generation(prompt, decoder, params, model)
        pending = None
        for _ in gen.steps():
            if pending is not None:
                yield pending
            pending = gen.trace()
        yield gen.trace()

    def run(self, prompt: str, decoder: str, params: dict, model: str | None = None) -> Trace:
        return self.generation(prompt, decoder, params, model).run()

    def run_spec(self, prompt: str, spec: str, model: str | None = None) -> Trace:
        """Decode with a SPEC string such as ``s2d2:preset=sdar-a,block_size=4``."""
        try:
            name, params = parse_spec(spec)
        except ConfigError as e:
            raise UserError(str(e)) from None
        return self.run(prompt, name, params, model)

    def sweep(self, specs: list[str], n: int, progress=None, model: str | None = None) -> list[dict]:
        """Accuracy / NFE / TPF / tokens/s of each SPEC on n held-out problems (engine.bench)."""
        if not 1 <= n <= 500:
            raise UserError("the number of problems must be in 1..500")
        if not specs or len(specs) > 48:
            raise UserError("a sweep takes 1..48 settings")
        try:
            return run_bench(self.model(model), "arith", n, specs, progress=progress)
        except ConfigError as e:
            raise UserError(str(e)) from None
