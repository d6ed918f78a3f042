"""The training mix of the tasks model: arithmetic plus the uncertain tasks, one problem stream."""

from __future__ import annotations

import random

from engine.tasks.arith import ArithTask
from engine.tasks.common import Problem, TaskBase
from engine.tasks.picks import PicksTask
from engine.tasks.story import StoryTask


class MixTask(TaskBase):
    name = "mix"
    description = "arith 30 %, story 40 %, picks 30 % (what unmask-tasks-small and its drafter were trained on)"
    weights = {"arith": 0.3, "story": 0.4, "picks": 0.3}

    def __init__(self):
        self.parts = {t.name: t for t in (ArithTask(), StoryTask(), PicksTask())}

    def sample(self, rng: random.Random) -> Problem:
        name = rng.choices(list(self.weights), list(self.weights.values()))[0]
        return self.parts[name].sample(rng)

    def constrained(self, problem: Problem) -> bool:
        return self.parts[problem.task].constrained(problem)

    def verdict(self, generated_text: str, problem: Problem) -> str:
        return self.parts[problem.task].verdict(generated_text, problem)

    def vocabulary(self) -> list[str]:
        return sorted(set().union(*(t.vocabulary() for t in self.parts.values())))
