"""Distinct picks: "Name three different fruits." Many right answers; all must differ, listed alphabetically.

    prompt:   "Q : Name three different fruits . A :"          or two groups, each may require one item:
              "Q : Name two different colors with red and three different drinks . A :"
    solution: "fig , kiwi , plum ."                              "gray , red and milk , soda , tea ."

Why this task: every slot is uncertain on its own, and the joint constraint (different, in alphabetical order)
is exactly what committing several sampled slots at once breaks and what a verifier repairs. Why the order: a
prototype with unordered picks learned only the marginals (greedy decoding wrote "goat , goat , goat"), because
excluding a used item is worth only ln n - ln(n-1) nats; and a first run of this task with five items per
category still wrote "pear , pear , pear" after 900 steps. Alphabetical order turns the exclusion into a local
rule (an item must come after the previous one), which carries most of the slot's entropy and is learned fast.
"""

from __future__ import annotations

import random

from engine.tasks.common import Problem, TaskBase
from engine.tasks.story import normalise

CATEGORIES = {"fruits": ["plum", "kiwi", "lime", "pear", "fig"],
              "animals": ["cat", "dog", "owl", "cow", "pig"],
              "colors": ["red", "blue", "green", "pink", "gray"],
              "tools": ["saw", "drill", "hammer", "axe", "rake"],
              "drinks": ["tea", "milk", "juice", "soda", "water"],
              "games": ["chess", "golf", "tennis", "poker", "bingo"]}
COUNTS = {"two": 2, "three": 3}
WITH_P = 0.5   # how often a group requires one named item


class PicksTask(TaskBase):
    name = "picks"
    description = "name K different items of a category (five each), in alphabetical order"

    def sample(self, rng: random.Random) -> Problem:
        groups = rng.sample(sorted(CATEGORIES), rng.choice([1, 1, 2]))
        counts = [rng.choice(sorted(COUNTS)) for _ in groups]
        # A group may name one item the answer must include ("with red"): 6 x 2 x 6 one-group and
        # 30 x 12 x 12 two-group prompts, ~4 400 in all, so a 10 % split holds ~440 distinct ones.
        need = [rng.choice(CATEGORIES[c]) if rng.random() < WITH_P else "" for c in groups]
        asks = " and ".join(f"{k} different {c}" + (f" with {w}" if w else "")
                            for k, c, w in zip(counts, groups, need))
        picks = [sorted([w] * bool(w) + rng.sample([x for x in CATEGORIES[c] if x != w], COUNTS[k] - bool(w)))
                 for k, c, w in zip(counts, groups, need)]
        solution = " and ".join(" , ".join(p) for p in picks) + " ."
        answer = tuple((c, COUNTS[k], w) for k, c, w in zip(counts, groups, need))
        return Problem(f"Q : Name {asks} . A :", solution, answer, task=self.name)

    def constrained(self, problem: Problem) -> bool:
        return any(need for _, _, need in problem.answer)

    def verdict(self, generated_text: str, problem: Problem) -> str:
        text = normalise(generated_text)
        if not text.endswith(" .") and text != ".":
            return "malformed"
        parts = text[:-1].strip().split(" and ")
        if len(parts) != len(problem.answer):
            return "wrong count"
        for part, (cat, k, need) in zip(parts, problem.answer):
            items = [w.strip() for w in part.split(",")]
            if len(items) != k or any(not w or " " in w for w in items):
                return "wrong count"
            if any(w not in CATEGORIES[cat] for w in items):
                return "wrong category"
            if len(set(items)) < k:
                return "duplicate"
            if items != sorted(items):
                return "out of order"
            if need and need not in items:
                return "ignores prompt"
        return "valid"

    def vocabulary(self) -> list[str]:
        words = {"Q", ":", "A", "Name", "different", "and", "with", ",", "."} | set(COUNTS) | set(CATEGORIES)
        for items in CATEGORIES.values():
            words.update(items)
        return sorted(words)
