"""GSM8K graded exactly as lm-evaluation-harness grades it: 106 tricky (output, gold) pairs against lm-eval's own
filters and metric (tools/experiments/gsm8k_corpus.py wrote the stored verdicts from lm-eval's output)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.tasks.graders import grade_number

CORPUS = json.loads((Path(__file__).parent / "data" / "gsm8k_lmeval_verdicts.json").read_text())
MODES = ("strict-match", "flexible-extract")


def test_the_corpus_is_large_and_discriminating():
    rows = CORPUS["rows"]
    assert len(rows) >= 100 and len({r["output"] for r in rows}) >= 50
    for mode in MODES:             # both verdicts occur, and the two filters disagree somewhere
        assert 0 < sum(r[mode] for r in rows) < len(rows)
    assert any(r["strict-match"] != r["flexible-extract"] for r in rows)


@pytest.mark.parametrize("mode", MODES)
def test_our_verdicts_equal_the_stored_lm_eval_verdicts(mode):
    wrong = [(r["output"], r["gold"][-8:]) for r in CORPUS["rows"] if grade_number(r["output"], r["gold"], mode)
             != r[mode]]
    assert not wrong


def test_our_verdicts_equal_lm_eval_run_now():
    pytest.importorskip("lm_eval", reason="lm-eval is the eval extra (requirements-eval.txt)")
    from tools.experiments.gsm8k_corpus import verdicts
    now = verdicts()
    assert [{k: r[k] for k in MODES} for r in now] == [{k: r[k] for k in MODES} for r in CORPUS["rows"]]
    for r in now:
        for mode in MODES:
            assert grade_number(r["output"], r["gold"], mode) == r[mode], (mode, r["output"])


def test_the_cases_the_review_found():
    gold = "x\n#### 18"
    assert not grade_number("#### 18\nCheck: 2 more", gold, "flexible-extract")   # lm-eval takes the last number
    assert not grade_number("####18", gold, "strict-match")
    assert not grade_number("#### 18.00", gold, "strict-match")
    assert grade_number("#### 18.00", gold, "value")                               # our value mode, named apart


MATH_PAIRS = [  # (answer, gold, equivalent?) — each pair is also checked the other way round
    ("\\frac{1}{2}", "0.5", True), ("1/2", "\\frac{1}{2}", True), ("\\sqrt2", "\\sqrt{2}", True),
    ("\\dfrac{\\sqrt{3}}{2}", "\\frac{\\sqrt3}{2}", True), ("5\\text{ meters}", "5", True),
    ("\\frac{2}{4}", "\\frac{1}{2}", True), ("2\\pi", "2 \\pi", True), ("x^2+2x+1", "(x+1)^2", True),
    ("\\left(1, 2\\right)", "(1,2)", True), ("10\\%", "10", True), ("0.25", "\\frac14", True), ("3.0", "3", True),
    ("\\{1, 2\\}", "\\{2, 1\\}", True), ("-\\frac{1}{3}", "\\frac{-1}{3}", True), ("\\sqrt{8}", "2\\sqrt{2}", True),
    ("1000", "1{,}000", True), ("90^\\circ", "90", True), ("\\$18", "18", True), ("\\pi/2", "\\frac{\\pi}{2}", True),
    ("\\frac{6}{3}", "2", True),
    ("357", "3, 5, 7", False), ("-21", "-2,1", False), ("12", "1,2", False), ("\\frac{1}{3}", "\\frac{1}{2}", False),
    ("0.33", "\\frac{1}{3}", False), ("\\sqrt{3}", "3", False), ("2", "-2", False), ("(1,2)", "(2,1)", False),
    ("x+1", "x-1", False), ("5", "50", False), ("\\pi", "3.14", False), ("1,2,3", "1,2", False),
    ("\\frac{3}{2}", "\\frac{2}{3}", False), ("10", "100", False), ("2\\sqrt{2}", "\\sqrt{2}", False),
    ("\\infty", "-\\infty", False), ("a", "b", False), ("7", "\\frac{7}{2}", False), ("0", "0.1", False),
    ("4\\pi", "2\\pi", False),
]


@pytest.mark.parametrize("answer,gold,same", MATH_PAIRS)
def test_math_equivalence_with_math_verify_both_ways(answer, gold, same):
    pytest.importorskip("math_verify", reason="math-verify is the eval extra (requirements-eval.txt)")
    from engine.tasks.graders import grade_math
    assert grade_math(f"so \\boxed{{{answer}}}", gold, "math-verify") == same
    assert grade_math(f"so \\boxed{{{gold}}}", answer, "math-verify") == same


def test_the_normalising_grader_never_reads_a_list_as_a_number():
    from engine.tasks.graders import grade_math
    for answer, gold in (("357", "3, 5, 7"), ("-21", "-2,1"), ("12", "1,2")):
        assert not grade_math(f"\\boxed{{{answer}}}", gold, "normalise")
    assert grade_math("\\boxed{3,5,7}", "3, 5, 7", "normalise")
