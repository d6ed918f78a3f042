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
