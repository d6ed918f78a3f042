"""What every task shares: the problem record, the hash split, and deterministic per-split problem streams."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Problem:
    prompt: str        # "Q : ... A :"
    solution: str      # one reference answer (open-ended tasks accept many others)
    answer: object     # what the checker needs: the number, or the prompt's constraints
    task: str = "arith"
    chat: bool = True  # a chat model gets the prompt through its chat template; False: as plain text
    # a whole chat ((role, content), ...) ending with ``prompt`` as its user turn: worked examples before it
    # (ParallelBench's 1-shot files); empty: the prompt alone
    messages: tuple = field(default=(), compare=False)

    @property
    def text(self) -> str:
        return f"{self.prompt} {self.solution}"

    @property
    def typed(self) -> str:
        """The prompt as a person would type it (the model's prompt template adds "Q : ... A :" back)."""
        body = self.prompt.removeprefix("Q : ").removesuffix(" A :")
        for mark in (" .", " ?", " ,"):
            body = body.replace(mark, mark[1:])
        return body


def split_of(prompt: str) -> str:
    """Hash split: 80 % train, 10 % val, 10 % test, fixed forever for a given prompt text."""
    h = int(hashlib.sha1(prompt.encode()).hexdigest()[:8], 16) % 10
    return "test" if h == 0 else "val" if h == 1 else "train"


class TaskBase:
    """A task draws problems with ``sample(rng)`` and grades text with ``verdict``; the rest is shared."""
    name = "base"
    description = ""
    model = "unmask-tasks-small"     # the embedded model that knows this task
    stream = None                    # the name that seeds its problems, if not its own (a variant of a task)

    def sample(self, rng: random.Random) -> Problem:
        raise NotImplementedError

    def verdict(self, generated_text: str, problem: Problem) -> str:
        raise NotImplementedError

    def constrained(self, problem: Problem) -> bool:
        """Whether the prompt states a choice the answer must honour beyond the task's defaults (training can
        draw more of these: ``train --focus``)."""
        return False

    @property
    def grader_name(self) -> str:
        """Who grades this task's answers, as a bench row names it."""
        return f"unmask {self.name} checker"

    def check(self, generated_text: str, problem: Problem) -> bool:
        return self.verdict(generated_text, problem) == "valid"

    def problems(self, split: str, n: int, seed: int = 0) -> list[Problem]:
        """The first n problems of `split` drawn from a stream seeded by (task, split, seed); deterministic.

        Prompts are distinct until the split's prompt space is exhausted (story ~1 000 and picks ~450 distinct test
        prompts); only then may one recur. Bench rows report how many were distinct (``n_prompts``)."""
        if split not in ("train", "val", "test"):
            raise ValueError(f"unknown split {split!r}")
        rng = random.Random(f"{getattr(self, 'stream', None) or self.name}/{split}/{seed}")
        out, seen = [], set()
        tries = 0
        while len(out) < n:
            prob = self.sample(rng)
            tries += 1
            fresh = prob.prompt not in seen or tries > 400 * n   # repeats only once the split is exhausted
            if split_of(prob.prompt) == split and fresh:
                seen.add(prob.prompt)
                out.append(prob)
        return out
