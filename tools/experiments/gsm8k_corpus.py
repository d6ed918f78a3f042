"""The GSM8K grading corpus: tricky outputs against two gold solutions, with lm-evaluation-harness's own verdicts.

    python -m tools.experiments.gsm8k_corpus        # rewrites tests/data/gsm8k_lmeval_verdicts.json (needs lm-eval)

The verdicts are computed by lm-eval's own ``RegexFilter`` and ``exact_match_hf_evaluate`` with the gsm8k task's
settings, never written by hand; tests/test_graders.py checks Unmask's grader against them (and against lm-eval
itself where it is installed).
"""

from __future__ import annotations

from pathlib import Path
from tools import provenance

GOLDS = ["She pays 3 * 24 = $<<3*24=72>>72.\n#### 72", "He owes 1,200 - 50 = <<1200-50=1150>>1150.\n#### 1150"]
OUTPUTS = [
    "#### 72", "####72", "#### 72.00", "#### 72.", "#### $72", "#### 72\nCheck: 2 more", "#### 72 dollars",
    "The answer is 72.", "The answer is $72.", "72", "72.0", "$72.00", "So 3*24=72, then 72 + 0 = 72.",
    "She pays 72. #### 72", "#### 7 2", "####  72", "#### -72", "#### 0072", "#### 72,", "It is 72 #### 73",
    "#### 73\nno wait, 72", "seventy-two", "", "#### 1150", "#### 1,150", "#### 1,150.", "#### $1,150",
    "The total is 1,150.", "The total is 1150 dollars.", "1150.00", "#### 1.150", "#### 11,50", "####1150",
    "He owes 1,200 - 50 = 1150.\n#### 1150", "He owes 1150. Tip: 15", "#### 1150\n\nQuestion: next", "1 150",
    "#### 1150 #### 1151", "#### 1151 #### 1150", "answer: -1150", "#### +1150", "#### 1150!", "#### 1150\u00a0",
    "Result: 72%", "72/1", "#### 72/1", "#### 36*2", "The price was $24.00 each, so $72.00 total.",
    "3 items at 24 = 72\n#### 72", "#### 72\n#### 73", "#### 72 #### 72", "The answer: 72.\n", "72..",
]


def verdicts() -> list[dict]:
    """Each (output, gold) pair with lm-eval's strict-match and flexible-extract verdicts."""
    from lm_eval.api.metrics import exact_match_hf_evaluate
    from lm_eval.filters.extraction import RegexFilter
    ignore = [",", "\\$", "(?s).*#### ", "\\.$"]
    filters = {"strict-match": RegexFilter(r"#### (\-?[0-9\.\,]+)"),
               "flexible-extract": RegexFilter(r"(-?[$0-9.,]{2,})|(-?[0-9]+)", group_select=-1)}
    rows = []
    for gold in GOLDS:
        for out in OUTPUTS:
            row = dict(output=out, gold=gold)
            for mode, f in filters.items():
                pred = list(f.apply([[out]], [{}]))[0][0]
                row[mode] = bool(exact_match_hf_evaluate([pred], [gold], regexes_to_ignore=ignore,
                                                         ignore_case=True)["exact_match"])
            rows.append(row)
    return rows


def main() -> None:
    import lm_eval
    path = Path(__file__).resolve().parents[2] / "tests" / "data" / "gsm8k_lmeval_verdicts.json"
    provenance.write(path, dict(lm_eval=lm_eval.__version__, rows=verdicts()))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
