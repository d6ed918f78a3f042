"""Coherent stories: early random choices (a name, a home, a thing) must be repeated consistently later.

    prompt:   "Q : Tell a story about a brave fox named Leo who lives in Oslo . A :"   (each of the adjective, the
              name and the home is stated in the prompt or left to the model, independently)
    solution: "Once there was a brave fox named Leo . Leo lived in Oslo . One day Leo sailed to Rome .
               There Leo found a red kite . Leo took the kite home to Oslo . Leo was very proud . The end ."

Why this task: a copy of a random choice carries that choice's whole entropy in the loss (ln 16 nats for a name),
so a 3.4 M model learns the copies within minutes; yet every first mention is genuinely uncertain. Two masked
mentions of the name have the same marginal, so parallel decoding that *samples* several at once commits two
different names: the joint failure that one-at-a-time decoding and verification avoid. 45 tokens per answer,
with the dependencies spanning several blocks.

The destination must be a city later in the alphabet than home. A first run that only required "a different
city" wrote the same city twice under greedy decoding after 2 000 steps (excluding one of eight cities is worth
ln 8 - ln 7 = 0.13 nats); "later in the alphabet" is a comparison with one earlier token, which a tiny model
learns in a few hundred steps, and the destination stays uncertain.
"""

from __future__ import annotations

import random
import re

from engine.tasks.arith import NAMES
from engine.tasks.common import Problem, TaskBase

ANIMALS = ["fox", "wolf", "bear", "duck", "frog", "goat", "lion", "mole", "seal", "swan", "toad", "yak"]
ADJECTIVES = ["brave", "small", "clever", "shy", "old", "young"]
PLACES = sorted(["Oslo", "Paris", "Rome", "Lima", "Cairo", "Tokyo", "Delhi", "Quito"])
MOVES = ["walked", "ran", "flew", "sailed"]
COLORS = ["red", "blue", "green", "pink", "gray", "gold", "white", "black"]
THINGS = ["kite", "drum", "hat", "map", "lamp", "key", "ring", "bell", "boat", "book"]
FEELINGS = ["happy", "proud", "glad", "tired", "calm", "sleepy"]
NAME_WORDS = [n for n, *_ in NAMES]
GIVEN_P = {"adj": 0.4, "name": 0.5, "home": 0.4}   # how often the prompt states each choice

TEMPLATE = ("Once there was a {adj} {animal} named {name} . {name} lived in {home} . One day {name} {move} to "
            "{away} . There {name} found a {color} {thing} . {name} took the {thing} home to {home} . "
            "{name} was very {feeling} . The end .")
STORY_RE = re.compile(
    r"Once there was a (?P<adj>\w+) (?P<animal>\w+) named (?P<name>\w+) \. (?P<name2>\w+) lived in (?P<home>\w+) \. "
    r"One day (?P<name3>\w+) (?P<move>\w+) to (?P<away>\w+) \. There (?P<name4>\w+) found a (?P<color>\w+) "
    r"(?P<thing>\w+) \. (?P<name5>\w+) took the (?P<thing2>\w+) home to (?P<home2>\w+) \. (?P<name6>\w+) was very "
    r"(?P<feeling>\w+) \. The end \.")
VOCAB = {"adj": ADJECTIVES, "animal": ANIMALS, "name": NAME_WORDS, "home": PLACES, "move": MOVES,
         "away": PLACES, "color": COLORS, "thing": THINGS, "feeling": FEELINGS}


def normalise(text: str) -> str:
    """The tokenizer's decoder glues punctuation to words ("Leo."); split it off again before parsing."""
    return " ".join(re.sub(r"([.,?!:])", r" \1 ", text).split())


class StoryTask(TaskBase):
    name = "story"
    description = "a templated story whose random name, home and thing must be repeated consistently"

    def sample(self, rng: random.Random) -> Problem:
        c = {k: rng.choice(v) for k, v in VOCAB.items()}
        c["home"] = rng.choice(PLACES[:-1])
        c["away"] = rng.choice([p for p in PLACES if p > c["home"]])
        # Each stated choice independently: 12 animals x 7 x 17 x 8 = 11 424 prompts, so a 10 % split holds
        # ~1 100 distinct ones (one of three choices at a time gave 27 in the test split).
        given = [k for k in ("adj", "name", "home") if rng.random() < GIVEN_P[k]]
        adj = f"{c['adj']} " if "adj" in given else ""
        named = f" named {c['name']}" if "name" in given else ""
        lives = f" who lives in {c['home']}" if "home" in given else ""
        prompt = f"Q : Tell a story about a {adj}{c['animal']}{named}{lives} . A :"
        answer = {"animal": c["animal"], **{k: c[k] for k in given}}
        return Problem(prompt, TEMPLATE.format(**c), tuple(sorted(answer.items())), task=self.name)

    def constrained(self, problem: Problem) -> bool:
        return "adj" in dict(problem.answer)

    def verdict(self, generated_text: str, problem: Problem) -> str:
        m = STORY_RE.fullmatch(normalise(generated_text))
        if not m:
            return "malformed"
        g = m.groupdict()
        if any(g[k] not in VOCAB[k] for k in VOCAB):
            return "unknown word"
        if len({g[k] for k in ("name", "name2", "name3", "name4", "name5", "name6")}) > 1:
            return "inconsistent name"
        if g["home"] != g["home2"] or g["thing"] != g["thing2"]:
            return "inconsistent"
        if g["home"] == g["away"]:
            return "same place"
        if g["away"] < g["home"]:
            return "away not after home"
        if any(g[k] != v for k, v in dict(problem.answer).items()):
            return "ignores prompt"
        return "valid"

    def vocabulary(self) -> list[str]:
        words = set(TEMPLATE.split()) | set("Q : A : Tell a story about a named who lives in .".split())
        for v in VOCAB.values():
            words.update(v)
        return sorted(w for w in words if "{" not in w)
