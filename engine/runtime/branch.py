"""Branching a finished decode: resume from the state after step s, under the same decoder or another, with a
token forced by hand, so two futures of one decode can be compared.

The state after step s (1-based, as the page's slider counts forwards) is read from the base trace: the prompt,
then every record's block as that forward left it (and its edits to the previous block). The branch resumes at
the first block that still holds a [MASK]. Its cache is rebuilt exactly in one forward over the prompt and the
finished blocks (kind "resume", counted apart from the branch's own forwards as ``nfe_resume``); a
full-attention model's Fast-dLLM cache is made again at the branch's first forward, as that cache would make it at
a block's start. A forced token is committed before the branch's first forward (record kind "force").

Where we chose:
- A decoder's state (TSPD's trajectories, S2D2's router, LLaDA's quota schedule, Prophet's progress over the
  decode) starts fresh at the branch point. The random stream goes on from where the run's stood after step s
  (each record that drew from it keeps the generator's state, ``rng_state``), unless the branch's spec names
  another seed, which starts its own. So a branch of a rule that reads only the canvas and its dial (ar,
  threshold, eb, edit, subblock) reproduces the base run from step s + 1 on, at any step, greedy or sampled; one
  of a decoder with state within a block (llada, s2d2, tspd, wino, klass, credit, simsd) at a block's end
  (``tests/test_branch.py``).
- A forced token goes to a slot still masked after step s; a revising decoder may rewrite it later.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from engine.catalogue.catalogue import MAX_PROMPT_CHARS
from engine.errors import ConfigError


@dataclass(frozen=True)
class Branch:
    step: int                                  # resume from the state after this step (0 = before the first)
    force: tuple[int, int] | None = None       # (absolute position, token id) committed before the first forward

    def check(self, base, vocab_size: int, canvas: list[int] | None = None) -> None:
        """A one-line ConfigError unless this branch fits the base trace and the model's vocabulary (``canvas``:
        the base's ``canvas_after`` this step, if the caller has it)."""
        n = len(base.records)
        if not isinstance(self.step, int) or not 0 <= self.step <= n:
            raise ConfigError(f"branch step must be in 0..{n} (the base run's forwards), not {self.step!r}")
        if self.force is None:
            return
        pos, tok = self.force
        canvas, m = canvas or canvas_after(base, self.step), base.meta
        if not (isinstance(pos, int) and m.prompt_len <= pos < m.gen_end):
            raise ConfigError(f"forced position must be a generated slot, {m.prompt_len}..{m.gen_end - 1}")
        if canvas[pos] != m.mask_token_id:
            raise ConfigError(f"position {pos} is already decoded after step {self.step}: force a masked slot")
        if not isinstance(tok, int) or not 0 <= tok < vocab_size or tok == m.mask_token_id:
            raise ConfigError(f"forced token must be a token id of the model other than [MASK], not {tok!r}")


def canvas_after(base, step: int) -> list[int]:
    """(gen_end,) token ids after ``step`` forwards of the base run (a branch's own run starts from the canvas it
    resumed from, so a branch of a branch starts where its base stood)."""
    m = base.meta
    start = (m.branch or {}).get("canvas")
    canvas = list(start) if start else list(m.prompt_ids) + [m.mask_token_id] * (m.gen_end - m.prompt_len)
    for rec in base.records[:step]:
        for p, t in zip(rec.positions.tolist(), rec.tokens_after.tolist()):
            canvas[p] = t
        for positions, tokens in rec.outside():
            for p, t in zip(positions.tolist(), tokens.tolist()):
                canvas[p] = t
    return canvas


@dataclass
class Resume:
    """What a Generation starts from: the canvas after the base run's step, and a forced token if any."""
    canvas: list[int]
    force: tuple[int, int] | None
    meta: dict                                 # the branch's description in the trace (``TraceMeta.branch``)
    seed: int = 0                              # the base run's seed
    rng_state: object = None                   # its random stream after the step (None: not drawn from yet)


def resume_of(base, branch: Branch, spec: str, vocab_size: int) -> Resume:
    canvas = canvas_after(base, branch.step) if isinstance(branch.step, int) and branch.step >= 0 else None
    branch.check(base, vocab_size, canvas)
    m = base.meta
    drawn = [r.rng.rng_state for r in base.records[:branch.step] if r.rng.rng_state is not None]
    return Resume(canvas, branch.force,
                  dict(base_decoder=m.decoder, base_params=m.params, base_prompt=m.prompt, step=branch.step,
                       force=list(branch.force) if branch.force else None, spec=spec, canvas=list(canvas),
                       fresh="the decoder's state within the block starts fresh here; the random stream goes on "
                             "from the run's unless the branch names another seed"),
                  seed=m.seed, rng_state=drawn[-1] if drawn else None)


def parse_branch(value) -> tuple[Branch, str | None]:
    """A branch as a client sends it, a JSON object or its text: ``{"step": 5, "force": [40, 123], "spec":
    "edit:tau=0.8"}`` (force and spec optional; spec: the branch's decoder SPEC, default the base run's). Anything
    else is a one-line ConfigError."""
    if isinstance(value, str):
        if len(value) > MAX_PROMPT_CHARS:
            raise ConfigError(f"a branch is at most {MAX_PROMPT_CHARS} characters")
        from engine.tasks.safe_read import check_depth
        check_depth(value, "a branch")                    # nesting bounded before parsing (no RecursionError)
        try:
            value = json.loads(value)
        except ValueError:
            raise ConfigError('a branch is a JSON object: {"step": 5, "force": [40, 123], "spec": "edit"}') from None
    if not isinstance(value, dict) or not set(value) <= {"step", "force", "spec"} or "step" not in value:
        raise ConfigError('a branch has "step" and may have "force" and "spec", nothing else')
    step, force, spec = value["step"], value.get("force"), value.get("spec")
    if type(step) is not int:
        shown = repr(step)[:60] if isinstance(step, (str, float, bool, type(None))) else type(step).__name__
        raise ConfigError(f"branch step must be an integer, not {shown}")
    if step < 0:                                          # refused before its base run is decoded
        raise ConfigError(f"branch step must be 0 or more (the base run's forwards), not {step}")
    if force is not None and not (isinstance(force, list) and len(force) == 2 and all(type(x) is int for x in force)):
        raise ConfigError("force must be [position, token id], two integers")
    if spec is not None and not isinstance(spec, str):
        raise ConfigError("spec must be a decoder SPEC string")
    return Branch(step, tuple(force) if force is not None else None), spec or None


def branch_json(how: Branch, spec: str | None) -> str:
    """A branch as ``parse_branch`` reads it back (the page's link carries it)."""
    return json.dumps({"step": how.step, "force": list(how.force) if how.force else None, "spec": spec},
                      separators=(",", ":"))
