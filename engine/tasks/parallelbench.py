"""ParallelBench's task families (Kang et al., "ParallelBench: Understanding the Trade-offs of Parallel Decoding
in Diffusion LLMs", ICLR 2026, arXiv 2510.04767), written from the paper's definitions: our own generators, name
list and generators; graders that follow the benchmark's metrics (its own files, read from a user's local copy, and
its metrics re-implemented: ``parallelbench_files``, ``parallelbench_metrics``).

The waiting line: a line of names and one operation.

    prompt:   "Q : shuffle : ann bob cal dan . A :"          "Q : insert zoe at 2 : ann bob cal . A :"
    solution: "cal ann dan bob ."  (one of many)             "ann zoe bob cal ."

Why these: each answer slot's marginal is what a parallel decoder samples from. For copy the marginal of every slot
is a point mass, so decoding all slots in one forward loses nothing; for shuffle every slot's marginal is spread
over the line's names, and slots sampled in one forward ignore each other, so they repeat a name with probability
1 - r! / ((r - m)! r^m) for m slots drawn from r names left (the paper's closed form, ``shuffle_success``).

Puzzles: a 4 x 4 Latin square over four given symbols (many answers; ``latin`` graded by the benchmark's set check,
``latin-strict`` by four rows of four exactly), and a 4 x 4 sudoku: ``sudoku`` as the benchmark has it (12 givens,
one solution, exact match), ``sudoku-hard`` Unmask's own (4-10 blanks, any valid completion; the training mix's).
Rows are separated by ";". Positions in the index operations count from 1.
"""

from __future__ import annotations

import math
import random

from engine.tasks.common import Problem, TaskBase

NAMES = ["ann", "bob", "cal", "dan", "eve", "fay", "gus", "hal", "ivy", "jon", "kim", "lee", "max", "ned",
         "oli", "pam", "quin", "rex", "sam", "tom", "uma", "val", "wes", "zoe"]
LENGTHS = (3, 6)         # the paper's default line lengths; ``LineTask(lengths=(7, 10))`` for longer lines
SYMBOLS = list("abcdefghwxyz")   # 12 letters: C(12, 4) x 4! = 11 880 Latin prompts


def spaced(text: str) -> str:
    """Punctuation as words, whitespace single ("ann bob." -> "ann bob ."): the tokenizer's decoder glues it."""
    return " ".join(text.replace(".", " . ").replace(";", " ; ").split())


def words(text: str) -> list[str]:
    """The answer's items, the closing "." dropped ("ann bob ." -> ["ann", "bob"])."""
    parts = spaced(text).split()
    return parts[:-1] if parts and parts[-1] == "." else parts


def in_order_with_one_new(out: list[str], line: list[str], new: str, replaced: bool) -> bool:
    """Random insert (replaced False): `out` is `line` with `new` at any one place. Random replace (True): `out` is
    `line` with exactly one item replaced by `new`, the others in place."""
    if replaced:
        diff = [i for i, (a, b) in enumerate(zip(out, line)) if a != b]
        return len(out) == len(line) and len(diff) == 1 and out[diff[0]] == new
    return len(out) == len(line) + 1 and any(out[:i] + out[i + 1:] == line and out[i] == new
                                            for i in range(len(out)))


class LineTask(TaskBase):
    """One waiting-line operation. ``op`` names it; ``lengths`` bounds the line (inclusive)."""
    model = "unmask-parallel-small"
    family = "waiting_line"
    ops = ("copy", "reverse", "sort", "shuffle", "insert-index", "remove-index", "replace-index",
           "insert-random", "remove-random", "replace-random")

    def __init__(self, op: str = "copy", lengths: tuple[int, int] = LENGTHS):
        if op not in self.ops:
            raise ValueError(f"unknown waiting-line operation {op!r}")
        self.op, self.lengths = op, lengths
        self.name = op if lengths == LENGTHS else f"{op}@{lengths[0]}-{lengths[1]}"
        self.description = f"ParallelBench waiting line: {op.replace('-', ' at ')} (lines of {lengths[0]}-" \
                           f"{lengths[1]} names)"

    def sample(self, rng: random.Random) -> Problem:
        line = rng.sample(NAMES, rng.randint(*self.lengths))
        new = rng.choice([n for n in NAMES if n not in line])
        at = rng.randint(1, len(line) + (self.op == "insert-index"))
        ask, out = self.operate(line, new, at, rng)
        return Problem(f"Q : {ask} : {' '.join(line)} . A :", " ".join(out) + " .",
                       {"op": self.op, "line": line, "new": new, "at": at}, task=self.name)

    def operate(self, line: list[str], new: str, at: int, rng: random.Random) -> tuple[str, list[str]]:
        """(the operation as the prompt words it, one right answer)."""
        i = at - 1
        if self.op == "shuffle":
            out = line[:]
            while out == line:
                rng.shuffle(out)
            return "shuffle", out
        return {"copy": ("copy", line), "reverse": ("reverse", line[::-1]), "sort": ("sort", sorted(line)),
                "insert-index": (f"insert {new} at {at}", line[:i] + [new] + line[i:]),
                "remove-index": (f"remove {at}", line[:i] + line[i + 1:]),
                "replace-index": (f"replace {at} with {new}", line[:i] + [new] + line[i + 1:]),
                "insert-random": (f"insert {new} anywhere", line[:i] + [new] + line[i:]),
                "remove-random": ("remove one", line[:i] + line[i + 1:]),
                "replace-random": (f"replace one with {new}", line[:i] + [new] + line[i + 1:])}[self.op]

    def verdict(self, generated_text: str, problem: Problem) -> str:
        text = spaced(generated_text)
        if not text.endswith(".") or text.count(".") != 1:
            return "malformed"
        return line_verdict(words(text), problem.answer)

    def vocabulary(self) -> list[str]:
        return sorted(set(NAMES) | {"Q", ":", "A", ".", "copy", "reverse", "sort", "shuffle", "insert", "remove",
                                     "replace", "at", "with", "anywhere", "one"})


def line_verdict(out: list[str], a: dict) -> str:
    """The paper's graders on the answer's items: exact match for deterministic operations (against ``expected``
    when a file gives it); a permutation of the input that differs from it (shuffle); the line with one new item
    anywhere (random insert), one item replaced in place (random replace), or one item removed, the rest in order
    (random remove)."""
    line, new = a["line"], a.get("new")
    ok = {"shuffle": lambda: sorted(out) == sorted(line) and out != line,
          "insert-random": lambda: in_order_with_one_new(out, line, new, replaced=False),
          "replace-random": lambda: in_order_with_one_new(out, line, new, replaced=True),
          "remove-random": lambda: any(out == line[:j] + line[j + 1:] for j in range(len(line)))}
    if a["op"] in ok:
        return "valid" if ok[a["op"]]() else "wrong"
    want = a.get("expected") or LineTask(a["op"]).operate(line, new, a["at"], random.Random(0))[1]
    return "valid" if out == want else "wrong"


def latin_ok(rows: list[list[str]], symbols: list[str]) -> bool:
    """Every row and column holds each symbol once."""
    want = sorted(symbols)
    return (len(rows) == len(symbols) and all(sorted(r) == want for r in rows)
            and all(sorted(col) == want for col in zip(*rows)))


def grid_of(text: str) -> list[list[str]]:
    """"a b ; b a ." -> [["a", "b"], ["b", "a"]]."""
    return [r.split() for r in " ".join(words(text)).split(";")]


def latin_square(rng: random.Random, symbols: list[str]) -> list[list[str]]:
    """A uniformly relabelled, row- and column-shuffled cyclic Latin square (every 4 x 4 square is reachable up to
    its isotopy class; enough variety for a generator)."""
    n = len(symbols)
    base = [[(r + c) % n for c in range(n)] for r in range(n)]
    rows, cols, labels = rng.sample(range(n), n), rng.sample(range(n), n), rng.sample(symbols, n)
    return [[labels[base[r][c]] for c in cols] for r in rows]


def latin_sets_ok(rows: list[list[str]], symbols: list[str]) -> bool:
    """ParallelBench's set-based check (its ``latin_square_score``) on rows already split: rows whose cells form
    exactly the symbol set are kept, others dropped; the first n kept must number n, and every row's and column's
    SET be the symbols (columns zip to the shortest row, so a row with an extra repeated symbol passes)."""
    want, n = set(symbols), len(symbols)
    kept = [r for r in rows if set(r) == want]
    return len(kept) >= n and all(set(c) == want for c in zip(*kept[:n]))


class LatinTask(TaskBase):
    """A 4 x 4 Latin square over four given symbols: "Q : latin a b c d . A :" -> "a b c d ; b a d c ; … .".
    Graded as ParallelBench grades it (``latin_sets_ok``, rows at ";" for its lines, cells at spaces for its
    commas); ``strict``: the answer ends once with its "." and is exactly four rows of four, each row and column
    holding each symbol once (``latin_ok``)."""
    model = "unmask-parallel-small"
    family = "puzzle"

    def __init__(self, strict: bool = False):
        self.strict, self.stream = strict, "latin"           # both graders on the same problems
        self.name = "latin-strict" if strict else "latin"
        self.description = ("ParallelBench puzzle: a 4 x 4 Latin square over four given symbols (many answers; "
                            + ("strict: four rows of four exactly)" if strict else "the benchmark's set check)"))

    def sample(self, rng: random.Random) -> Problem:
        symbols = rng.sample(SYMBOLS, 4)
        square = latin_square(rng, symbols)
        return Problem(f"Q : latin {' '.join(symbols)} . A :", " ; ".join(" ".join(r) for r in square) + " .",
                       {"symbols": symbols}, task=self.name)

    def verdict(self, generated_text: str, problem: Problem) -> str:
        if not self.strict:
            return "valid" if latin_sets_ok(grid_of(generated_text), problem.answer["symbols"]) else "wrong"
        if not spaced(generated_text).endswith(".") or spaced(generated_text).count(".") != 1:
            return "malformed"
        return "valid" if latin_ok(grid_of(generated_text), problem.answer["symbols"]) else "wrong"

    def vocabulary(self) -> list[str]:
        return sorted(set(SYMBOLS) | {"Q", ":", "A", ".", ";", "latin"})


def completions(givens: list[list[str]], limit: int = 2) -> int:
    """How many valid 4 x 4 sudokus complete the givens ("_" blank), counted up to ``limit`` (backtracking over
    the blanks in reading order, each digit tried only where its row, column and box lack it)."""
    rows = [list(r) for r in givens]
    blanks = [(r, c) for r in range(4) for c in range(4) if rows[r][c] == "_"]

    def fits(r: int, c: int, d: str) -> bool:
        box = {rows[r // 2 * 2 + i][c // 2 * 2 + j] for i in (0, 1) for j in (0, 1)}
        return d not in rows[r] and d not in (rows[k][c] for k in range(4)) and d not in box

    def count(k: int) -> int:
        if k == len(blanks):
            return 1
        r, c = blanks[k]
        found = 0
        for d in "1234":
            if found < limit and fits(r, c, d):
                rows[r][c] = d
                found += count(k + 1)
                rows[r][c] = "_"
        return found
    return min(count(0), limit) if latin_ok_partial(rows) else 0


def latin_ok_partial(rows: list[list[str]]) -> bool:
    """No digit twice in a row, column or box among the givens."""
    groups = rows + [list(c) for c in zip(*rows)] + [[rows[r + i][c + j] for i in (0, 1) for j in (0, 1)]
                                                    for r in (0, 2) for c in (0, 2)]
    return all(len([d for d in g if d != "_"]) == len({d for d in g if d != "_"}) for g in groups)


class SudokuTask(TaskBase):
    """A 4 x 4 sudoku (digits 1-4, 2 x 2 boxes) as ParallelBench has it (``puzzle/sudoku_n4_12``): 12 givens, "_"
    for the 4 blanks, a unique solution, graded by exact match of the grid (its ``sudoku_score``)."""
    model = "unmask-parallel-small"
    family = "puzzle"
    name = "sudoku"
    description = "ParallelBench puzzle: a 4 x 4 sudoku with 12 givens and one solution (exact match)"
    blanks = (4, 4)

    def sample(self, rng: random.Random) -> Problem:
        digits = list("1234")
        square = latin_square(rng, digits)
        while not boxes_ok(square):
            square = latin_square(rng, digits)
        while True:
            hide = set(rng.sample(range(16), rng.randint(*self.blanks)))
            givens = [[d if 4 * r + c not in hide else "_" for c, d in enumerate(row)] for r, row in enumerate(square)]
            if self.unique_only is False or completions(givens) == 1:
                break
        return Problem("Q : sudoku " + " ; ".join(" ".join(r) for r in givens) + " . A :",
                       " ; ".join(" ".join(r) for r in square) + " .", {"givens": givens, "solution": square},
                       task=self.name)

    unique_only = True

    def verdict(self, generated_text: str, problem: Problem) -> str:
        return "valid" if grid_of(generated_text) == problem.answer["solution"] else "wrong"

    def vocabulary(self) -> list[str]:
        return ["Q", ":", "A", ".", ";", "_", "sudoku"]


class SudokuHardTask(SudokuTask):
    """Unmask's harder variant (its training mix's): 4-10 blanks, so a puzzle may have several solutions (about
    13 % of 1 000 test puzzles do), and any valid completion that keeps the givens is right."""
    name = "sudoku-hard"
    description = "4 x 4 sudoku, 4-10 blanks (several solutions possible), any valid completion that keeps the givens"
    blanks, unique_only = (4, 10), False
    stream = "sudoku"         # the problems it had under that name, on which the model card measured it

    def verdict(self, generated_text: str, problem: Problem) -> str:
        if not spaced(generated_text).endswith(".") or spaced(generated_text).count(".") != 1:
            return "malformed"
        rows, givens = grid_of(generated_text), problem.answer["givens"]
        if not latin_ok(rows, list("1234")) or not boxes_ok(rows):
            return "wrong"
        kept = all(g == "_" or g == d for gr, r in zip(givens, rows) for g, d in zip(gr, r))
        return "valid" if kept else "ignores givens"


def boxes_ok(rows: list[list[str]]) -> bool:
    """Each 2 x 2 box of a 4 x 4 grid holds four different digits."""
    return all(len({rows[r + i][c + j] for i in (0, 1) for j in (0, 1)}) == 4 for r in (0, 2) for c in (0, 2))


def shuffle_success(groups: list[int], n: int) -> float:
    """The paper's closed form for shuffle under a model whose conditionals are exact: slots committed in one
    forward are independent draws from the names not yet used, so a forward that commits m of the r names left
    keeps them distinct with probability r! / ((r - m)! r^m). `groups` lists how many answer slots each forward
    committed (one forward at a time: copy's point-mass marginals give 1 whatever the grouping)."""
    p, left = 1.0, n
    for m in groups:
        m = min(m, left)
        p *= math.perm(left, m) / left ** m if left else 1.0
        left -= m
    return p


LINE_TASKS = {op: (lambda op=op: LineTask(op)) for op in LineTask.ops}
PUZZLES = {"latin": LatinTask, "latin-strict": lambda: LatinTask(strict=True), "sudoku": SudokuTask,
           "sudoku-hard": SudokuHardTask}
FAMILY_OF = {**{op: "waiting_line" for op in LineTask.ops}, **{name: "puzzle" for name in PUZZLES}}
# the training mix's puzzles, in the order that fixes its stream (unmask-parallel-small learnt sudoku-hard's)
MIX_PUZZLES = {"latin": LatinTask, "sudoku-hard": SudokuHardTask}


class ParallelMix(TaskBase):
    """The training mix of unmask-parallel-small: every waiting-line operation and both puzzles, one stream
    (puzzles weighted up: they are the longest answers and the hardest to learn)."""
    name = "parallel"
    model = "unmask-parallel-small"
    description = "every ParallelBench family Unmask has (waiting line x 10, Latin square, sudoku-hard), one stream"

    def __init__(self):
        self.parts = {n: f() for n, f in {**LINE_TASKS, **MIX_PUZZLES}.items()}
        self.weights = {n: (3.0 if n in MIX_PUZZLES else 1.0) for n in self.parts}

    def sample(self, rng: random.Random) -> Problem:
        name = rng.choices(list(self.weights), list(self.weights.values()))[0]
        return self.parts[name].sample(rng)

    def verdict(self, generated_text: str, problem: Problem) -> str:
        return self.parts[problem.task].verdict(generated_text, problem)

    def vocabulary(self) -> list[str]:
        return sorted(set().union(*(t.vocabulary() for t in self.parts.values())))


BENCH_NAMES = {"latin-square-n4": "latin", "sudoku-n4-12": "sudoku"}   # the benchmark's file names


def own_name(bench_name: str) -> str | None:
    """The generator here nearest to one of the benchmark's task names ("parallelbench:waiting_line/shuffle" ->
    "shuffle", "parallelbench:waiting_line_n15/copy" -> "copy@15-15", "parallelbench:puzzle/sudoku_n4_12" ->
    "sudoku"), for the line that refuses the name without its files; None if there is none."""
    name = bench_name.removeprefix("parallelbench:")
    if name.startswith("waiting_line_n15/"):
        name = name.removeprefix("waiting_line_n15/") + "@15-15"
    name = name.removeprefix("waiting_line/").removeprefix("puzzle/").replace("_", "-")
    name = BENCH_NAMES.get(name, name)
    return name if parallel_task(name) is not None else None


def parallel_task(name: str) -> TaskBase | None:
    """Unmask's own generators of ParallelBench's families: "shuffle", "shuffle@7-10" (longer lines), "latin",
    "sudoku", ...; None for any other name. The benchmark's names ("parallelbench:GROUP/NAME") are its files' rows
    only (``parallelbench_files``, with --data)."""
    if name in PUZZLES:
        return PUZZLES[name]()
    op, _, lengths = name.partition("@")
    if op not in LineTask.ops:
        return None
    if not lengths:
        return LineTask(op)
    lo, _, hi = lengths.partition("-")
    if not (lo.isdigit() and hi.isdigit() and 1 <= int(lo) <= int(hi) <= len(NAMES) - 1):
        return None
    return LineTask(op, (int(lo), int(hi)))
