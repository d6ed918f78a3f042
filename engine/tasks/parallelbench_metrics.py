"""ParallelBench's own graders (furiosa-ai/ParallelBench, ``dataset/parallel_bench/metrics.py``), re-implemented
from reading that file so that a row scored here gets the number the released code gives it. Pure Python, no
imports beyond ``re``: the text-writing metrics that need packages live in ``parallelbench_text``.

Every grader here answers a pair ``(score, score_strict)`` of 0.0 / 1.0, as the benchmark's ``compute_metrics``
reports them for a metric that returns a float: the loose parse and the strict one.

The list parse, the heart of the ten waiting-line tasks (``parse_list``):

- loose: the text after the LAST "[" (the whole text if it has none), up to the next "]" (to its end if none),
  split at ",", each piece with quotes and spaces stripped from its ends, empty pieces dropped. So an output that
  echoes the input list before its answer is read by its answer; ``[Ann, Bob]`` reads as two names.
- strict: None unless there is a "[" and a "]" after it, and the inside is items joined by exactly ", ", each
  wrapped in double quotes with no quote inside (``["Ann", "Bob"]`` only).

A differing detail is not a bug to fix here: both parses are the benchmark's definition of right.
"""

from __future__ import annotations

import re


def parse_list(text: str, strict: bool = False) -> list[str] | None:
    """The answer list as the benchmark reads it (see the module doc); None only in the strict parse."""
    if "[" in text:
        text = text.rsplit("[", 1)[1]
    elif strict:
        return None
    if "]" in text:
        text = text.split("]", 1)[0]
    elif strict:
        return None
    if not strict:
        # the emptiness test strips whitespace, the kept item only quotes and spaces (a newline stays on it)
        return [item.strip('" ') for item in text.strip("[]").split(",") if item.strip()]
    items = []
    for item in text.split(", "):
        if not (item.startswith('"') and item.endswith('"')):
            return None
        item = item[1:-1]
        if '"' in item:
            return None
        items.append(item)
    return items


def list_match(pred: str, label: str, strict: bool) -> float:
    """Exact match of the lists (copy, reverse, sort, the index operations; the label is the list as text)."""
    got = parse_list(pred, strict)
    return 0.0 if got is None else float(got == parse_list(label))


def list_shuffle(pred: str, label: dict, strict: bool) -> float:
    """The same names as the input, in another order (duplicates count: sorted lists are compared)."""
    got, line = parse_list(pred, strict), list(label["input"])
    return 0.0 if got is None else float(sorted(got) == sorted(line) and got != line)


def removed_one(pred: list[str], line: list[str], n_words: int = 1) -> float:
    """``pred`` is ``line`` less ``n_words`` of its names (by set difference), the rest in order."""
    if len(pred) != len(line) - n_words:
        return 0.0
    gone = set(line) - set(pred)
    if len(gone) != n_words:
        return 0.0
    rest = list(line)
    for name in gone:
        rest.remove(name)
    return float(pred == rest)


def inserted(pred: list[str] | None, line: list[str], word, n_words: int = 1) -> float:
    """``pred`` less the first occurrence of each new word is ``line``; no word given: ``line`` is ``pred`` less
    one name (the benchmark's remove check with the lists swapped)."""
    if pred is None:
        return 0.0
    if word is None:
        return removed_one(list(line), list(pred), n_words)
    rest = list(pred)
    for w in [word] if isinstance(word, str) else word:
        if w not in rest:
            return 0.0
        rest.remove(w)
    return float(rest == list(line))


def replaced(pred: list[str] | None, line: list[str], word, n_words: int = 1) -> float:
    """Same length; the new word's FIRST place in ``pred`` is the replaced slot and every other slot is the line's.
    No word given: exactly ``n_words`` slots differ."""
    if pred is None or len(pred) != len(line):
        return 0.0
    if word is None:
        return float(sum(p != g for p, g in zip(pred, line)) == n_words)
    if word not in pred:
        return 0.0
    want = list(line)
    want[pred.index(word)] = word
    return float(pred == want)


def list_random_insert(pred: str, label: dict, strict: bool) -> float:
    return inserted(parse_list(pred, strict), label["input"], label.get("word"), label.get("n_words", 1))


def list_random_remove(pred: str, label: dict, strict: bool) -> float:
    got = parse_list(pred, strict)
    return 0.0 if got is None else removed_one(got, list(label["input"]), label.get("n_words", 1))


def list_random_replace(pred: str, label: dict, strict: bool) -> float:
    return replaced(parse_list(pred, strict), label["input"], label.get("word"), label.get("n_words", 1))


def latin_square(pred: str, label: dict, strict: bool = False) -> float:
    """The benchmark's set-based check (it has no strict form: both scores are this one). Lines whose comma-split
    cells, stripped, form exactly the symbol set are kept, others dropped; the first ``size`` kept lines are the
    rows; every row's and column's SET must be the symbols (columns zip to the shortest row, so a row with a
    repeated symbol added, "A,B,C,D,A", still passes); a given first row must match."""
    symbols, first_row = set(label["symbols"]), label.get("first_row")
    lines = [ln.strip() for ln in pred.split("\n") if ln.strip()]
    lines = [ln for ln in lines if {c.strip() for c in ln.split(",")} == symbols]
    if len(lines) < len(symbols):
        return 0.0
    rows = [[c.strip() for c in ln.split(",")] for ln in lines[:len(symbols)]]
    if any(set(r) != symbols for r in rows) or any(set(c) != symbols for c in zip(*rows)):
        return 0.0
    return float(first_row is None or rows[0] == list(first_row))


def parse_sudoku(text: str, strict: bool = False, n: int = 4) -> list[list[int]] | None:
    """Loose: spaces and commas removed, every non-empty line with exactly n digits is a row (others are skipped),
    exactly n such rows. Strict: exactly n non-empty lines, each exactly n digit characters."""
    text = text.strip()
    if not strict:
        text = text.replace(" ", "").replace(",", "")
        grid = []
        for ln in (ln.strip() for ln in text.split("\n")):
            row = [int(d) for d in re.findall(r"\d", ln)] if ln else []
            if len(row) == n:
                grid.append(row)
        return grid if len(grid) == n else None
    lines = [ln.strip() for ln in text.split("\n") if ln.strip()]
    if len(lines) != n or any(len(ln) != n for ln in lines):
        return None
    try:
        return [[int(ch) for ch in ln] for ln in lines]
    except ValueError:
        return None


def sudoku(pred: str, label: str, strict: bool) -> float:
    """Exact match of the grid (the puzzle's solution is unique)."""
    return float(parse_sudoku(pred, strict) == parse_sudoku(label, strict=True))


BINARY = {"list_match_score": list_match, "list_shuffle_score": list_shuffle,
          "list_random_insert_score": list_random_insert, "list_random_remove_score": list_random_remove,
          "list_random_replace_score": list_random_replace, "latin_square_score": latin_square,
          "sudoku_score": sudoku}


def binary_scores(metric: str, pred: str, label) -> dict[str, float]:
    """{"score", "score_strict"} of one output under one of the benchmark's 0/1 metrics."""
    grade = BINARY[metric]
    return {"score": grade(pred, label, False), "score_strict": grade(pred, label, True)}
