"""Tasks from data files: a JSONL of problems and a card that says how to pose and grade them.

A data task is a folder with ``data.jsonl`` (or ``.jsonl.gz``) and ``card.json``. Each line is one problem:
``id``, ``prompt``, ``answer`` (the gold answer text the grader reads), optional ``split`` (default ``test``) and,
for code, ``test`` and ``entry_point``. The card:

    {"name": "gsm8k", "grader": "number", "strict": false, "shots": 0, "few_shot": [{"prompt": …, "answer": …}],
     "template": "Question: {prompt}\\nAnswer:", "stop": ["Question:"], "gen_length": 256, "source": {…}}

The prompt is ``shots`` worked examples (``template`` + answer, a blank line between) and then the problem in the
same template. A model with a chat template gets that text as one user message (``ModelAdapter.encode_prompt``)
unless the card says ``"chat": false``; any other model gets it as plain text. The generation is cut at the first
stop string, then graded
(``engine.tasks.graders``; ``code`` runs only through ``engine.tasks.sandbox``, from the command line, when asked).
The shipped tasks live under ``assets/tasks/``; a file of one's own is named on the command line only.
"""

from __future__ import annotations

import json
from pathlib import Path

from engine.errors import ConfigError
from engine.tasks import safe_read
from engine.tasks.common import Problem, TaskBase
from engine.tasks.graders import GRADERS, NUMBER_MODES

SHIPPED = Path(__file__).resolve().parents[2] / "assets" / "tasks"
MAX_ROWS = safe_read.MAX_ROWS


def read_rows(path: Path, required: tuple = ("id", "prompt", "answer"), folder: Path | None = None) -> list[dict]:
    """The file's problems, read safely (``engine.tasks.safe_read``: regular files in ``folder`` only, bytes,
    lines, rows and nesting bounded while streaming)."""
    rows, k = [], 0
    try:
        for k, line in safe_read.lines(path, folder):
            safe_read.check_depth(line, f"{path.name}, line {k}")
            rows.append(json.loads(line))
    except UnicodeDecodeError:
        raise ConfigError(f"{path.name}: not UTF-8 text") from None
    except ValueError as e:
        raise ConfigError(f"{path.name}, line {k}: not a JSON object ({type(e).__name__})") from None
    except OSError as e:        # unreadable, or a .gz that is not gzip
        raise ConfigError(f"{path.name}: unreadable ({type(e).__name__})") from None
    except RecursionError:
        raise ConfigError(f"{path.name}, line {k}: JSON nested too deep") from None
    if not rows or len(rows) > MAX_ROWS:
        raise ConfigError(f"{path.name}: expected 1..{MAX_ROWS} problems, found {len(rows)}")
    for k, r in enumerate(rows):
        if not isinstance(r, dict) or not all(isinstance(r.get(f), str) for f in required):
            raise ConfigError(f"{path.name}, line {k + 1}: a problem needs string fields {', '.join(required)}")
    return rows


class DataTask(TaskBase):
    """A task read from a folder (``card.json`` + ``data.jsonl[.gz]``)."""
    model = None          # no embedded model knows it: the command line asks for --model

    def __init__(self, folder: Path, allow_code: bool = False):
        folder = Path(folder)
        try:
            self.card = safe_read.read_json(folder / "card.json", folder)
        except (OSError, ValueError) as e:
            raise ConfigError(f"{folder.name}: no readable card.json ({type(e).__name__})") from None
        if not isinstance(self.card, dict):
            raise ConfigError(f"{folder.name}: card.json must hold a JSON object")
        data = next((p for p in (folder / "data.jsonl", folder / "data.jsonl.gz") if p.exists()), None)
        if data is None:
            raise ConfigError(f"{folder.name}: no data.jsonl or data.jsonl.gz beside its card")
        self.rows = read_rows(data, folder=folder)
        self.name = str(self.card.get("name", folder.name))
        self.grader = self.card.get("grader", "exact")
        if self.grader not in (*GRADERS, "code"):
            raise ConfigError(f"{self.name}: unknown grader {self.grader!r}; known: {', '.join(GRADERS)}, code")
        self.description = self.card.get("description", "")
        # GSM8K's grading mode: a card names it ("mode"), or says strict true / false (lm-eval's two filters)
        self.number_mode = self.card.get("mode") or ("strict-match" if self.card.get("strict", True)
                                                     else "flexible-extract")
        if self.grader == "number" and self.number_mode not in NUMBER_MODES:
            raise ConfigError(f"{self.name}: mode must be one of {', '.join(NUMBER_MODES)}")
        self.allow_code = allow_code
        self.check_card()

    @property
    def grader_name(self) -> str:
        """The grader and its version, as bench rows and the README name it."""
        from importlib.metadata import PackageNotFoundError, version
        from engine.tasks.graders import math_mode

        def ver(pkg: str) -> str:
            try:
                return version(pkg)
            except PackageNotFoundError:
                return "?"
        if self.grader == "number":
            return (f"lm-eval {ver('lm-eval')} {self.number_mode} rules" if self.number_mode != "value"
                    else "unmask value")
        if self.grader == "math":
            return f"math-verify {ver('math-verify')}" if math_mode() == "math-verify" else "unmask normalise"
        return "sandboxed tests (engine/tasks/sandbox.py)" if self.grader == "code" else f"unmask {self.grader}"

    def check_card(self) -> None:
        """A card of one's own fails here, in one line, not in the middle of a bench."""
        c = self.card
        safe_read.check_template(str(c.get("template", "{prompt}")), f"{self.name}: card.json")
        try:
            ok = (isinstance(c.get("template", "{prompt}"), str) and isinstance(c.get("shots", 0), int)
                  and isinstance(c.get("chat", True), bool)
                  and all(isinstance(s, str) for s in c.get("stop", []))
                  and all(isinstance(s.get("prompt"), str) and isinstance(s.get("answer"), str)
                          for s in c.get("few_shot", [])))
            ok = ok and bool(self.prompt_of("x"))
        except (AttributeError, TypeError, KeyError, IndexError, ValueError):
            ok = False
        if not ok:
            raise ConfigError(f"{self.name}: card.json needs a template with {{prompt}} only, an integer shots, "
                              "chat true or false, stop strings and few_shot entries with prompt and answer")

    def prompt_of(self, question: str) -> str:
        template = self.card.get("template", "{prompt}")
        shots = self.card.get("few_shot", [])[: int(self.card.get("shots", 0))]
        worked = [template.format(prompt=s["prompt"]) + " " + s["answer"] for s in shots]
        return "\n\n".join([*worked, template.format(prompt=question)])

    def problems(self, split: str, n: int, seed: int = 0) -> list[Problem]:
        """The first n problems of the split, in file order (the field's numbers are on the whole test set)."""
        rows = [r for r in self.rows if r.get("split", "test") == split]
        if n > len(rows):
            raise ConfigError(f"{self.name} has {len(rows)} {split} problems; asked for {n}")
        chat = self.card.get("chat", True)
        return [Problem(self.prompt_of(r["prompt"]), r["answer"], r, self.name, chat) for r in rows[:n]]

    def cut(self, text: str) -> str:
        """The generation up to its first stop string."""
        for s in self.card.get("stop", []):
            text = text.split(s, 1)[0]
        return text

    def verdict(self, generated_text: str, problem: Problem) -> str:
        text, gold = self.cut(generated_text), problem.answer["answer"]
        if self.grader == "code":
            if not self.allow_code:
                return "ungraded"       # code runs only from the command line, with --allow-code-execution
            from engine.tasks.sandbox import run_tests
            return run_tests(problem.answer, text)
        extra = {"mode": self.number_mode} if self.grader == "number" else {}
        return "valid" if GRADERS[self.grader](text, gold, **extra) else "wrong"


def shipped() -> dict[str, Path]:
    """The data tasks that ship with Unmask: name -> folder."""
    return {p.parent.name: p.parent for p in sorted(SHIPPED.glob("*/card.json"))}
