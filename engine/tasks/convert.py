"""Turn the public benchmark files into Unmask data tasks (assets/tasks/<name>/: data.jsonl.gz, card.json, LICENSE).

    python -m engine.tasks.convert gsm8k grade-school-math/grade_school_math/data  [--commit SHA]
    python -m engine.tasks.convert math500 KLASS/data/math_test.json                [--commit SHA]
    python -m engine.tasks.convert humaneval human-eval/data/HumanEval.jsonl.gz     [--commit SHA]

Run once by a maintainer on checked-out copies of the sources (the card records repository, path and commit);
nothing downloads at run time.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

from engine.tasks.data import SHIPPED
from engine.tasks.graders import last_boxed

GSM_TEMPLATE = "Question: {prompt}\nAnswer:"
CARDS = {
    "gsm8k": dict(grader="number", strict=False, mode="flexible-extract", shots=0, template=GSM_TEMPLATE, stop=["Question:"], gen_length=256,
                  description="GSM8K test (1 319 grade-school word problems), scored as lm-evaluation-harness "
                              "0.4.13 scores it: flexible-extract (its last number-like match, exact match after "
                              "its regexes_to_ignore); the card's mode may name strict-match or Unmask's own value",
                  source=dict(repo="openai/grade-school-math", path="grade_school_math/data/test.jsonl",
                              licence="MIT")),
    "math500": dict(grader="math", shots=0, template="Problem: {prompt}\nPut the final answer in \\boxed{{}}.\n"
                    "Solution:", stop=["Problem:"], gen_length=512,
                    description="MATH-500 (Lightman et al.'s 500-problem test split of Hendrycks et al.'s MATH); "
                                "graded on the last \\boxed{} answer",
                    source=dict(repo="shkim0116/KLASS", path="data/math_test.json", licence="MIT (MATH: MIT)")),
    "humaneval": dict(grader="code", shots=0, template="{prompt}", stop=["\nclass", "\ndef", "\n#", "\nif",
                      "\nprint"], gen_length=256,
                      description="HumanEval (164 Python functions); a completion passes when the function's "
                                  "tests do (sandboxed; only with --allow-code-execution)",
                      source=dict(repo="openai/human-eval", path="data/HumanEval.jsonl.gz", licence="MIT")),
}


def gsm8k(src: Path) -> tuple[list[dict], list[dict]]:
    rows = [json.loads(x) for x in (src / "test.jsonl").read_text().splitlines() if x.strip()]
    train = [json.loads(x) for x in (src / "train.jsonl").read_text().splitlines() if x.strip()][:8]
    return ([dict(id=f"gsm8k-test-{i}", prompt=r["question"], answer=r["answer"]) for i, r in enumerate(rows)],
            [dict(prompt=r["question"], answer=r["answer"]) for r in train])


def math500(src: Path) -> tuple[list[dict], list[dict]]:
    rows = [json.loads(x) for x in src.read_text().splitlines() if x.strip()]
    return [dict(id=f"math500-{i}", prompt=r["problem"], answer=last_boxed(r["solution"]), solution=r["solution"],
                 subject=r.get("type", ""), level=r.get("level", "")) for i, r in enumerate(rows)], []


def humaneval(src: Path) -> tuple[list[dict], list[dict]]:
    rows = [json.loads(x) for x in gzip.open(src, "rt").read().splitlines() if x.strip()]
    return [dict(id=r["task_id"], prompt=r["prompt"], answer=r["canonical_solution"], test=r["test"],
                 entry_point=r["entry_point"]) for r in rows], []


def write(name: str, rows: list[dict], few_shot: list[dict], commit: str, licence: str) -> Path:
    out = SHIPPED / name
    out.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(out / "data.jsonl.gz", "wb", mtime=0) as f:        # mtime 0: the same bytes every time
        f.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode())
    card = dict(name=name, **CARDS[name], few_shot=few_shot)
    card["source"] = dict(card["source"], commit=commit, problems=len(rows))
    (out / "card.json").write_text(json.dumps(card, indent=1, ensure_ascii=False) + "\n")
    (out / "LICENSE").write_text(licence)
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name", choices=tuple(CARDS))
    ap.add_argument("source", help="the checked-out file or folder")
    ap.add_argument("--licence", required=True, help="the source repository's LICENSE file")
    ap.add_argument("--commit", default="", help="the source repository's commit")
    args = ap.parse_args(argv)
    rows, few = dict(gsm8k=gsm8k, math500=math500, humaneval=humaneval)[args.name](Path(args.source))
    print(write(args.name, rows, few, args.commit, Path(args.licence).read_text()), len(rows))


if __name__ == "__main__":
    main()
