"""GSM8K-style arithmetic word problems with a worked solution and a checkable final answer.

Every number (start, operand, intermediate, answer) lies in 0..99. A problem has 1-3 operations: add, subtract,
double or triple. Splits are disjoint by construction: a problem's split is a hash of its prompt text, so the
train generator can never emit a test prompt, whatever seeds are used.

Text format (tokens separated by spaces, so the closed-vocabulary tokenizer sees every word):
    prompt:   "Q : Ann has 29 books . She gives away 22 books . How many books does she have now ? A :"
    solution: "29 - 22 = 7 . Answer : 7"
"""

from __future__ import annotations

import random
import re

from engine.tasks.common import Problem, TaskBase, split_of  # noqa: F401  (split_of re-exported)

NAMES = [("Ann", "She", "she", "her"), ("Ben", "He", "he", "his"), ("Cara", "She", "she", "her"),
         ("Dan", "He", "he", "his"), ("Eva", "She", "she", "her"), ("Finn", "He", "he", "his"),
         ("Gina", "She", "she", "her"), ("Hugo", "He", "he", "his"), ("Iris", "She", "she", "her"),
         ("Jack", "He", "he", "his"), ("Kate", "She", "she", "her"), ("Leo", "He", "he", "his"),
         ("Mia", "She", "she", "her"), ("Noah", "He", "he", "his"), ("Olga", "She", "she", "her"),
         ("Paul", "He", "he", "his")]
OBJECTS = ["apples", "books", "coins", "pens", "cards", "stamps", "marbles", "shells", "stickers", "cookies",
           "balloons", "candies", "flowers", "toys", "eggs", "rocks"]

START = ["{N} has {x} {o} .", "{N} owns {x} {o} .", "{N} starts with {x} {o} .",
         "There are {x} {o} in {n_pos} bag .", "{N} collects {x} {o} ."]
ADD = ["{P} buys {x} more {o} .", "{P} finds {x} more .", "A friend gives {n_obj} {x} {o} .",
       "{P} gets {x} more {o} .", "Then {p} picks up {x} {o} ."]
SUB = ["{P} gives away {x} {o} .", "{P} loses {x} of them .", "{P} eats {x} {o} .",
       "{P} sells {x} {o} .", "Then {p} uses {x} {o} ."]
MUL = ["{P} doubles {n_pos} {o} .", "The number of {o} doubles .", "{P} triples {n_pos} {o} .",
       "The number of {o} triples ."]
QUESTION = ["How many {o} does {p} have now ?", "How many {o} are there now ?",
            "How many {o} does {N} have in the end ?"]

ANSWER_RE = re.compile(r"Answer\s*:\s*(-?\d+)")


def extract_answer(text: str) -> int | None:
    m = ANSWER_RE.search(text)
    return int(m.group(1)) if m else None


class ArithTask(TaskBase):
    name = "arith"
    description = "GSM8K-style word problems, 1-3 operations, numbers 0..99, worked solution"
    model = "unmask-arith-tiny"
    max_value = 99

    def sample(self, rng: random.Random) -> Problem:
        name, P, p, n_pos = rng.choice(NAMES)
        obj = rng.choice(OBJECTS)
        fmt = dict(N=name, P=P, p=p, n_pos=n_pos, n_obj="him" if P == "He" else "her", o=obj)
        cur = rng.randint(2, 60)
        sentences = [rng.choice(START).format(x=cur, **fmt)]
        steps = []
        for _ in range(rng.randint(1, 3)):
            ops = ["add", "sub"] + (["mul"] if cur * 2 <= self.max_value else [])
            op = rng.choice(ops)
            if op == "add" and cur < self.max_value:
                x = rng.randint(1, min(40, self.max_value - cur))
                sentences.append(rng.choice(ADD).format(x=x, **fmt))
                steps.append(f"{cur} + {x} = {cur + x} .")
                cur += x
            elif op == "sub" and cur > 1:
                x = rng.randint(1, min(40, cur))
                sentences.append(rng.choice(SUB).format(x=x, **fmt))
                steps.append(f"{cur} - {x} = {cur - x} .")
                cur -= x
            elif op == "mul":
                tpl = rng.choice(MUL if cur * 3 <= self.max_value else [t for t in MUL if "doubles" in t])
                k = 3 if "triples" in tpl else 2
                sentences.append(tpl.format(**fmt))
                steps.append(f"{cur} * {k} = {cur * k} .")
                cur *= k
        if not steps:  # every drawn op was impossible; retry keeps the distribution simple
            return self.sample(rng)
        sentences.append(rng.choice(QUESTION).format(**fmt))
        prompt = "Q : " + " ".join(sentences) + " A :"
        return Problem(prompt=prompt, solution=" ".join(steps) + f" Answer : {cur}", answer=cur)

    def verdict(self, generated_text: str, problem: Problem) -> str:
        got = extract_answer(generated_text)
        return "no answer" if got is None else "valid" if got == problem.answer else "wrong answer"

    def vocabulary(self) -> list[str]:
        """Every whole word the templates can produce (digits are handled by the tokenizer)."""
        words = {"Q", ":", "A", "Answer", "+", "-", "*", "=", ".", "?", "him", "her"}
        for name, P, p, n_pos in NAMES:
            words.update([name, P, p, n_pos])
        words.update(OBJECTS)
        for tpl in START + ADD + SUB + MUL + QUESTION:
            words.update(w for w in tpl.split() if "{" not in w)
        return sorted(words)
