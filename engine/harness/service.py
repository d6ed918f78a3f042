"""A decode service for front ends: loads models once (thread-safe), validates user input, streams traces.

Everything a UI needs from the engine goes through here, so the UI never touches torch. Errors a user can cause
(empty or oversized prompt, unknown model, bad parameter) raise ``UserError`` (``engine.errors``) with a message
meant for display. Every request's work is bounded by ``max_seconds`` of engine time (``UNMASK_MAX_SECONDS``,
default 60): a decode stops between forwards and a sweep between problems, keeping what finished.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from typing import Iterator

import torch

from engine import settings
from engine.catalogue import catalogue
from engine.harness.bench_stream import bench_stream
from engine.catalogue.catalogue import MAX_PROMPT_CHARS
from engine.decoders import build_decoder, parse_spec
from engine.errors import BudgetExceeded, UserError
from engine.runtime.branch import parse_branch, resume_of
from engine.runtime.engine_loop import Aborted, Job
from engine.runtime.jobs import engine_loop
from engine.models.memory import decode_need
from engine.runtime.loop import Generation, why_not
from engine.models.model import load_model
from engine.records.trace import Trace


def branch_generation(adapter, base, branch, budget_s: float | None = None, load=None, page: bool = False):
    """The branch's decode (a ``Generation``) from ``base``, a finished trace of the same model: ``branch`` as
    ``parse_branch`` reads it. Without a spec the branch runs the base's decoder with the base's parameters; a spec
    without ``gen_length`` keeps the base's."""
    how, spec = parse_branch(branch)
    name, params = parse_spec(spec) if spec else (base.meta.decoder, dict(base.meta.params))
    params.setdefault("gen_length", base.meta.gen_end - base.meta.prompt_len)
    return Generation(adapter, base.meta.prompt, build_decoder(name, page=page, **params), budget_s=budget_s,
                      load=load, resume=resume_of(base, how, spec or "", adapter.vocab_size))


MAX_SWEEP_SETTINGS = 48
MAX_SWEEP_PROBLEMS = 200
SWEEP_BATCH = 8            # problems a sweep decodes at once (engine.runtime.batch)


def budget_from_env() -> float:
    return settings.get("UNMASK_MAX_SECONDS")


def check_prompt(prompt) -> str:
    if not isinstance(prompt, str):
        raise UserError("The prompt must be text.")
    text = prompt.strip()
    if not text:
        raise UserError("The prompt is empty: type a question or pick an example.")
    if len(text) > MAX_PROMPT_CHARS:
        raise UserError(f"The prompt has {len(text)} characters; the limit is {MAX_PROMPT_CHARS}.")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise UserError("The prompt contains characters that are not valid text (lone surrogates).") from None
    return text


_LIVE: "weakref.WeakSet[DecodeService]" = weakref.WeakSet()


def _fresh_locks_in_child() -> None:
    """A forked child (a ZeroGPU worker) gets each service's model lock as it was at the fork: held, if a thread
    of the parent was loading a model then, and never released in the child. Its own lock instead."""
    for service in list(_LIVE):
        service._lock = threading.Lock()


os.register_at_fork(after_in_child=_fresh_locks_in_child)


class DecodeService:
    def __init__(self, default_model: str = "tiny", device: str | None = None, threads: int | None = None,
                 max_seconds: float | None = None, aliases: dict[str, str] | None = None):
        self.default_model, self.device = default_model, device
        self.aliases = dict(aliases or {})     # the short name a page offers -> the operator's path or hub id
        self.max_seconds = max_seconds if max_seconds is not None else budget_from_env()
        self._models: dict[str, object] = {}
        self._lock = threading.Lock()
        _LIVE.add(self)
        if threads:
            torch.set_num_threads(threads)

    @property
    def max_running(self) -> int:
        """Decodes that share a round of the engine loop (``UNMASK_MAX_RUNNING``; the device's default)."""
        return engine_loop().max_running

    @property
    def ledger(self):
        """The engine loop's measured service per flow (``engine.runtime.ledger``): the page's gate orders by it."""
        return engine_loop().ledger

    def model(self, name: str | None = None):
        key = name or self.default_model
        key = self.aliases.get(key, key)
        with self._lock:
            if key not in self._models:
                self._models[key] = load_model(key, device=self.device)
            return self._models[key]

    def model_id(self, name: str | None = None) -> str:
        """Model name plus a content fingerprint (weights and side files): part of every trace cache key."""
        a = self.model(name)
        return f"{a.name}@{a.info.get('revision', '?')}"

    check_prompt = staticmethod(check_prompt)
    @staticmethod
    def check_branch(branch, decoder: str | None = None, params: dict | None = None, page: bool = False) -> None:
        """What a branch's own text can tell, before its base is decoded: its form, and its spec's decoder and
        values (with the base's ``gen_length`` when it names none, as ``branch_generation`` gives it)."""
        _, spec = parse_branch(branch)
        if not spec:
            return
        name, values = parse_spec(spec)
        if "gen_length" not in values and decoder is not None:
            values["gen_length"] = build_decoder(decoder, page=page, **(params or {})).cfg.gen_length
        build_decoder(name, page=page, **values)

    def model_info(self, name: str | None = None) -> dict:
        """What the page's model picker shows: family, size, device, and which decoders apply (or why not)."""
        a = self.model(name)
        return dict(name=a.name, family=a.model_type, params=sum(p.numel() for p in a.model.parameters()),
                    device=str(a.device), dtype=str(a.dtype).removeprefix("torch."), attention=a.attention,
                    logit_shift=a.logit_shift, block_size=a.block_size, task=a.info.get("task"),
                    drafter=a.info.get("drafter"), note=a.info.get("note"),
                    note_short=a.info.get("note_short"),
                    decoders={d: why_not(d, a) for d in catalogue.DECODERS})

    def generation(self, prompt: str, decoder: str, params: dict, model: str | None = None,
                   page: bool = False) -> Generation:
        text = check_prompt(prompt)
        policy = build_decoder(decoder, page=page, **params)
        return Generation(self.model(model), text, policy, budget_s=self.max_seconds, load=self.model)

    def stream(self, prompt: str, decoder: str, params: dict, model: str | None = None, page: bool = False,
               client: str = "", every_s: float = 0.0, should_stop=None, first_at_once: bool = True
               ) -> Iterator[Trace]:
        """Yield a partial trace after each forward (at most one per ``every_s``); the last one yielded is the
        complete trace. The decode runs on the engine loop with every other (``engine.runtime.engine_loop``);
        ``client`` is its unit of fairness there; ``should_stop()`` true, or closing the iterator, aborts it.
        ``first_at_once`` False: the first partial only after ``every_s`` too (a script's client, which needs no
        first frame of a decode that ends sooner).

        Each partial is held back one forward, so the final forward is reported once, by the complete trace
        (which alone carries the EOS stop position and the full wall time). If the time budget runs out, the
        last trace is the partial one, with ``meta.limit`` saying which limit stopped it."""
        yield from self._stream(self.generation(prompt, decoder, params, model, page), client, every_s,
                                should_stop, first_at_once=first_at_once)

    def branch_stream(self, prompt: str, decoder: str, params: dict, model: str | None, branch,
                      page: bool = False, client: str = "", every_s: float = 0.0,
                      should_stop=None) -> Iterator[Trace]:
        """The base run (decoded again: it is deterministic), then the branch's traces as ``stream`` gives them:
        from the base's state after ``branch``'s step, with its forced token, under its decoder
        (``engine.runtime.branch``). The base and the branch share one budget; a base stopped by it is the last
        trace."""
        self.check_branch(branch, decoder, params, page)     # a bad branch is refused before the base is decoded
        t0 = time.monotonic()
        base = None
        for base in self._stream(self.generation(prompt, decoder, params, model, page), client, 0.0, should_stop):
            pass
        stopped = should_stop is not None and should_stop()     # aborted: ``base`` is partial, no branch follows
        if base is None or base.meta.limit or stopped:
            if base is not None:
                yield base
            return
        yield from self.branch_from(base, branch, model, page, client, every_s, should_stop,
                                    spent_s=time.monotonic() - t0)

    def branch_from(self, base: Trace, branch, model: str | None = None, page: bool = False, client: str = "",
                    every_s: float = 0.0, should_stop=None, spent_s: float = 0.0) -> Iterator[Trace]:
        """A branch of a finished run of ``model`` (the page's own trace, kept on the server), as ``stream``;
        ``spent_s``: what the request has already spent of its budget."""
        left = max(self.max_seconds - spent_s, 1e-3)
        gen = branch_generation(self.model(model), base, branch, left, self.model, page)
        yield from self._stream(gen, client, every_s, should_stop, left)

    def token_id(self, model: str | None, token: str) -> int:
        """A token of the model's vocabulary, as its tokenizer spells it, by id (a visitor's forced token)."""
        vocab = self.model(model).tokenizer.get_vocab()
        if not isinstance(token, str) or token.strip() not in vocab:
            raise UserError(f"{str(token)[:40]!r} is not a token of this model (pick a candidate or type one as the "
                            "candidates panel spells it)")
        return int(vocab[token.strip()])

    def _stream(self, gen: Generation, client: str = "", every_s: float = 0.0, should_stop=None,
                budget_s: float | None = None, first_at_once: bool = True) -> Iterator[Trace]:
        """The generation's snapshots from the engine loop, each held back one, then its final trace."""
        job = Job(gen.streamed, client=client, budget_s=budget_s or self.max_seconds, snapshot=gen.trace,
                  every_s=every_s, on_limit=gen.stopped, first_at_once=first_at_once, need=decode_need(gen.runner))
        handle = engine_loop().submit(job)
        pending = None
        try:
            for snap in handle.items(should_stop):
                if pending is not None:
                    yield pending
                pending = snap
            try:
                final = handle.result()
            except BudgetExceeded as e:
                e.partial.meta.limit = str(e)
                final = e.partial
            except Aborted:
                return
            # what the page's speed tile reads besides the wall time: the engine's own share, and the room
            final.meta.engine_s, final.meta.shared = handle.seconds, handle.peers / max(handle.rounds, 1)
            yield final
        finally:
            engine_loop().abort(handle)

    def run(self, prompt: str, decoder: str, params: dict, model: str | None = None, page: bool = False) -> Trace:
        last = None
        for last in self.stream(prompt, decoder, params, model, page):
            pass
        return last

    def sweep_problem(self, task: str, spec: str, outcomes: str, index: int) -> tuple[str, str, dict, object]:
        """(prompt, decoder, params, problem) that decode problem ``index`` of a sweep's row exactly as the sweep
        did: the task's test problem, and the setting with the seed the bench gave that problem
        (``problem_seed``). Only a problem the row counted wrong can be asked for."""
        from engine.harness.bench import problem_seed
        from engine.tasks import get_task
        if not isinstance(outcomes, str) or not isinstance(index, int) or not 0 <= index < len(outcomes) \
                or outcomes[index] != "0" or len(outcomes) > MAX_SWEEP_PROBLEMS:
            raise UserError("choose one of the setting's wrong answers")
        name, params = parse_spec(spec)
        cfg = build_decoder(name, page=True, **params).cfg
        prob = get_task(task).problems("test", index + 1, seed=0)[index]
        return prob.prompt, name, {**params, "seed": problem_seed(cfg.seed, 0, index)}, prob

    def sweep(self, specs: list[str], n: int, progress=None, model: str | None = None, task: str = "arith",
              page: bool = True, should_stop=None) -> list[dict]:
        """The rows of ``sweep_stream`` once every setting has run (or the sweep stopped)."""
        rows: list[dict] = []
        for rows in self.sweep_stream(specs, n, progress, model, task, page, should_stop):
            pass
        return rows

    def sweep_stream(self, specs: list[str], n: int, progress=None, model: str | None = None, task: str = "arith",
                     page: bool = True, should_stop=None, client: str = "") -> Iterator[list[dict]]:
        """Accuracy / NFE / TPF / tokens/s of each SPEC on the same n held-out problems (engine.harness.bench_stream:
        the settings queued one after another in one batched run, SWEEP_BATCH problems per forward), yielding the rows
        so far as each setting finishes. Stops between forwards when the time budget is spent or ``should_stop()``
        says so; a stopped setting's row counts the problems that finished before its first unfinished one."""
        if not isinstance(n, int) or not 1 <= n <= MAX_SWEEP_PROBLEMS:
            raise UserError(f"the number of problems must be in 1..{MAX_SWEEP_PROBLEMS}")
        if not specs or len(specs) > MAX_SWEEP_SETTINGS:
            raise UserError(f"a sweep takes 1..{MAX_SWEEP_SETTINGS} settings")
        for spec in specs:  # validate every setting before any work, with the page's limits
            name, params = parse_spec(spec)
            build_decoder(name, page=page, **params)
        deadline = time.monotonic() + self.max_seconds
        stop = lambda: time.monotonic() > deadline or bool(should_stop and should_stop())  # noqa: E731
        yield from bench_stream(self.model(model), task, n, specs, progress=progress, should_stop=stop,
                                budget_s=self.max_seconds, load=self.model, batch=SWEEP_BATCH, client=client)
