"""ParallelBench's own task files, read as its loader reads them and graded by its own metrics (command line only:
``bench --task parallelbench:GROUP/NAME --data PATH``; nothing downloads: PATH is your copy of the benchmark's
``dataset/parallel_bench/data/output/test`` folder, or one of its ``.jsonl`` files with ``task_config.yaml`` beside it).

What its loader (``ParallelBench.__getitem__``) gives, reproduced here:

- a row is ``{"input": {...}, "answer": ..., "metadata": {...}}``; the answer is a string (copy, reverse, sort, the
  index operations, sudoku) or an object (shuffle and the random operations: ``input`` and ``example``; Latin:
  ``symbols``; text writing: ``text``, ``summary``, ``words``);
- the prompt is the task's ``prompt`` in ``task_config.yaml`` formatted with the row's ``input``, a literal
  backslash-n turned into a newline; the chat is that one user message, preceded, for each of the row's
  ``icl_examples``, by the example's prompt and its answer (the string, or the object's ``example``) as an
  assistant turn: 1-shot for the waiting line and the puzzles, as the files ship. ``zero_shot`` drops the examples;
- rows pass through pandas and Arrow there, so a key one row lacks and another has reads as None: done here too.

Grading: ``engine.tasks.parallelbench_metrics`` (score and score_strict) and, for the text-writing tasks,
``engine.tasks.parallelbench_text``. A row's verdict is "valid" when the benchmark's ``score`` is 1.
"""

from __future__ import annotations

import re
import string
from pathlib import Path

from engine.errors import ConfigError
from engine.tasks import parallelbench_metrics as pm
from engine.tasks import safe_read
from engine.tasks.common import Problem, TaskBase
from engine.tasks.data import read_rows

GROUPS = ("waiting_line", "waiting_line_n15", "puzzle", "paraphrase_summarize", "words_to_sentence")
OPS = ("copy", "insert_index", "insert_random", "remove_index", "remove_random", "replace_index", "replace_random",
       "reverse", "shuffle", "sort")
# the benchmark's seventeen tasks (its README's list)
SEVENTEEN = (*(f"waiting_line/{op}" for op in OPS), "paraphrase_summarize/chatgpt-paraphrases",
             "paraphrase_summarize/samsum", "words_to_sentence/easy", "words_to_sentence/medium",
             "words_to_sentence/hard", "puzzle/latin_square_n4", "puzzle/sudoku_n4_12")
NAME = re.compile(r"parallelbench:(" + "|".join(GROUPS) + r")/([A-Za-z0-9][A-Za-z0-9_.-]{0,63})")
MAX_CONFIG = 1 << 20
# what each metric reads of a row's answer: (its field, None for the answer itself; the type it must have)
LABELS = {"list_match_score": (None, str), "sudoku_score": (None, str), "list_shuffle_score": ("input", list),
          "list_random_insert_score": ("input", list), "list_random_remove_score": ("input", list),
          "list_random_replace_score": ("input", list), "latin_square_score": ("symbols", list),
          "summary_score": ("summary", str), "paraphrase_score": ("text", str),
          "sentence_to_words_score": ("words", list)}


def official_name(name: str) -> str | None:
    """"parallelbench:puzzle/latin_square_n4" -> "puzzle/latin_square_n4" (the benchmark's own key); None for any
    other name."""
    m = NAME.fullmatch(name) if isinstance(name, str) else None
    return f"{m.group(1)}/{m.group(2)}" if m else None


def task_file(key: str, data: Path) -> Path:
    """The task's JSONL: ``data/GROUP/NAME.jsonl`` when ``data`` is the benchmark's split folder, else ``data``."""
    if data.is_dir():
        return safe_read.regular_file(data / f"{key}.jsonl", data)
    if not data.is_file():
        raise ConfigError(f"--data {str(data)[:80]!r}: not a file nor a folder")
    return safe_read.regular_file(data)


def task_config(path: Path, key: str) -> dict:
    """The task's entry in ``task_config.yaml`` beside its file (where the benchmark's ``load_task`` reads it)."""
    cfg_path = path.parent / "task_config.yaml"
    if not cfg_path.is_file():
        raise ConfigError(f"{path.name}: no task_config.yaml beside it (the benchmark's prompts and metrics are "
                          "there)")
    import yaml   # transformers' dependency; only this command-line path reads YAML
    text = safe_read.regular_file(cfg_path, path.parent, MAX_CONFIG).read_bytes().decode("utf-8", errors="replace")
    try:
        cfg = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"task_config.yaml: not YAML ({type(e).__name__})") from None
    entry = cfg.get(key) if isinstance(cfg, dict) else None
    if not isinstance(entry, dict) or not all(isinstance(entry.get(k), str) for k in ("prompt", "metric")):
        known = ", ".join(sorted(k for k in cfg if isinstance(k, str))[:20]) if isinstance(cfg, dict) else ""
        raise ConfigError(f"task_config.yaml has no task {key!r} with a prompt and a metric; it has: {known[:300]}")
    return entry


def template_fields(template: str) -> list[str]:
    """The fields the prompt names: plain names only (no attribute, index, conversion or format spec, which
    could reach into objects or ask for gigabytes)."""
    try:
        parsed = [(name, conv, spec) for _, name, spec, conv in string.Formatter().parse(template) if name is not None]
    except ValueError:
        raise ConfigError("task_config.yaml: the prompt is not a format string") from None
    if any(not name.isidentifier() or conv or spec for name, conv, spec in parsed):
        raise ConfigError("task_config.yaml: the prompt may name plain fields only ({context}, {word}, ...)")
    return [name for name, _, _ in parsed]


def with_all_keys(inputs: list[dict]) -> list[dict]:
    """Each dict with every key any of them has (None where it lacks one), as Arrow's struct columns give them."""
    keys = dict.fromkeys(k for d in inputs for k in d)
    return [{k: d.get(k) for k in keys} for d in inputs]


class OfficialTask(TaskBase):
    """One task read from the benchmark's files (``--task parallelbench:GROUP/NAME --data PATH``)."""
    model = None              # a real chat checkpoint: the command line asks for --model

    def __init__(self, key: str, data: Path, zero_shot: bool = False):
        path = task_file(key, Path(data))
        cfg = task_config(path, key)
        self.key, self.name, self.metric = key, f"parallelbench:{key}", cfg["metric"]
        self.template, self.fields = cfg["prompt"], template_fields(cfg["prompt"])
        self.grader = self.text_grader() if self.metric not in pm.BINARY else None
        self.graded = self.grader is None or self.grader.graded
        rows = read_rows(path, required=())
        self.rows = [self.checked(r, k + 1, path) for k, r in enumerate(rows)]
        self.problems_ = self.build(self.rows, zero_shot)
        shots = "0-shot" if zero_shot else f"{max(len(p.messages) // 2 for p in self.problems_)}-shot"
        self.description = f"ParallelBench's own {key} ({path.name}, {len(self.rows)} rows, {shots}, {self.metric})"

    def text_grader(self):
        from engine.tasks.parallelbench_text import TEXT_METRICS
        if self.metric not in TEXT_METRICS:
            raise ConfigError(f"metric {self.metric!r} is not one Unmask implements; it grades "
                              f"{', '.join(sorted(pm.BINARY) + sorted(TEXT_METRICS))}")
        return TEXT_METRICS[self.metric]()

    def checked(self, row, k: int, path: Path) -> dict:
        """The row, if it has what the prompt, the chat and the task's metric read (else one line)."""
        if not isinstance(row, dict) or not isinstance(row.get("input"), dict) or "answer" not in row:
            raise ConfigError(f"{path.name}, line {k}: a row needs an input object and an answer")
        shots = row["input"].get("icl_examples") or []
        if not isinstance(shots, list) or not all(
                isinstance(e, dict) and isinstance(e.get("input"), dict) and (isinstance(e.get("answer"), str) or (
                    isinstance(e.get("answer"), dict) and isinstance(e["answer"].get("example"), str)))
                for e in shots):
            raise ConfigError(f"{path.name}, line {k}: each icl_example needs an input and an answer (or example)")
        field, kind = LABELS[self.metric]
        value = row["answer"] if field is None else (row["answer"] or {}).get(field) if isinstance(
            row["answer"], dict) else None
        if not isinstance(value, kind) or (kind is list and not all(isinstance(v, str) for v in value)):
            raise ConfigError(f"{path.name}, line {k}: {self.metric} needs the answer"
                              f"{'' if field is None else '.' + field} as {kind.__name__}")
        return row

    def prompt(self, values: dict) -> str:
        missing = [f for f in self.fields if f not in values]
        if missing:
            raise ConfigError(f"the {self.key} prompt names {missing[0]!r}, which its rows' input lacks")
        return self.template.format_map({f: values[f] for f in self.fields}).replace("\\n", "\n")

    def build(self, rows: list[dict], zero_shot: bool) -> list[Problem]:
        inputs = with_all_keys([r["input"] for r in rows])
        examples = with_all_keys([e["input"] for r in rows for e in r["input"].get("icl_examples") or []])
        out, e = [], 0
        for row, values in zip(rows, inputs):
            chat = []
            for ex in row["input"].get("icl_examples") or []:
                answer = ex["answer"] if isinstance(ex["answer"], str) else ex["answer"]["example"]
                chat += [("user", self.prompt(examples[e])), ("assistant", answer)]
                e += 1
            label = row["answer"]
            solution = label if isinstance(label, str) else str(
                label.get("example") or label.get("summary") or label.get("examples") or "")
            prompt = self.prompt(values)
            messages = (("user", prompt),) if zero_shot or not chat else (*chat, ("user", prompt))
            out.append(Problem(prompt, solution, {"label": label, "metadata": row.get("metadata")}, self.name,
                               messages=messages))
        return out

    def problems(self, split: str, n: int, seed: int = 0) -> list[Problem]:
        """The file's first n rows, in order (the benchmark has one split)."""
        if n > len(self.problems_):
            raise ConfigError(f"{self.name} has {len(self.problems_)} problems; asked for {n}")
        return self.problems_[:n]

    @property
    def grader_name(self) -> str:
        return f"ParallelBench {self.metric} (re-implemented: engine/tasks/parallelbench_*.py)"

    def metrics(self, generated_text: str, problem: Problem) -> dict[str, float]:
        """The benchmark's per-sample metrics of one output (only those that can be computed here)."""
        label = problem.answer["label"]
        if self.grader is None:
            return pm.binary_scores(self.metric, generated_text, label)
        return self.grader(generated_text, label)

    def verdict(self, generated_text: str, problem: Problem) -> str:
        if self.grader is not None:
            return self.grader.verdict(generated_text, problem.answer["label"])
        return "valid" if self.metrics(generated_text, problem)["score"] == 1.0 else "wrong"

    def notes(self) -> list[str]:
        """What the bench cannot compute for this task, and why (printed, never replaced by another number)."""
        return self.grader.unavailable() if self.grader is not None else []
