"""ParallelBench's own waiting-line files, from a user's local copy (the command line's ``--data PATH``; nothing
downloads), scored with Unmask's graders (``engine.tasks.parallelbench.line_verdict``).

One JSON object a line, as the benchmark's task files hold them: ``messages`` (the chat; the last user message is
the prompt, earlier turns are its worked examples) and ``label`` with ``input`` (the line, a list of names) and
``example`` (one right answer, a JSON list as text). An answer is read as the first JSON list in the output.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from engine.errors import ConfigError
from engine.tasks.common import Problem, TaskBase
from engine.tasks.data import read_rows
from engine.tasks.parallelbench import LineTask, line_verdict

LIST = re.compile(r"\[[^\[\]]*\]", re.S)


def items_of(text: str) -> list[str] | None:
    """The first JSON list of strings in ``text`` (None if there is none)."""
    for m in LIST.finditer(text):
        try:
            value = json.loads(m.group(0))
        except ValueError:
            continue
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return value
    return None


def answer_of(row: dict, op: str, k: int, path: Path) -> dict:
    label = row.get("label")
    line = label.get("input") if isinstance(label, dict) else None
    example = items_of(label.get("example", "")) if isinstance(label, dict) and isinstance(
        label.get("example"), str) else None
    if not isinstance(line, list) or not all(isinstance(v, str) for v in line) or example is None:
        raise ConfigError(f"{path.name}, line {k}: a waiting-line row needs label.input (a list of names) and "
                          "label.example (a JSON list)")
    new = next((v for v in example if v not in line), None)     # the item a random insert or replace adds
    return {"op": op, "line": line, "new": new, "expected": example}


def prompt_of(row: dict, path: Path, k: int) -> list[dict]:
    msgs = row.get("messages")
    if not isinstance(msgs, list) or not msgs or not all(
            isinstance(m, dict) and isinstance(m.get("content"), str) and m.get("role") in ("user", "assistant",
                                                                                            "system")
            for m in msgs) or msgs[-1]["role"] != "user":
        raise ConfigError(f"{path.name}, line {k}: messages must be a chat ending with a user message")
    return msgs


class OfficialLineTask(TaskBase):
    """One waiting-line operation read from the benchmark's file (``--task parallelbench:waiting_line/OP``)."""
    model = None              # a real chat checkpoint: the command line asks for --model

    def __init__(self, op: str, path: Path):
        if op not in LineTask.ops:
            raise ConfigError(f"--data: unknown waiting-line operation {op!r}; known: {', '.join(LineTask.ops)}")
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"--data {str(path)[:80]!r}: not a file")
        self.op, self.name = op, f"parallelbench:waiting_line/{op.replace('-', '_')}"
        self.description = f"ParallelBench's own {op} file ({path.name})"
        rows = read_rows(path, required=())
        self.rows = [(prompt_of(r, path, k + 1), answer_of(r, op, k + 1, path)) for k, r in enumerate(rows)]

    def problems(self, split: str, n: int, seed: int = 0) -> list[Problem]:
        """The file's first n rows, in order (the benchmark has one split)."""
        if n > len(self.rows):
            raise ConfigError(f"{self.name} has {len(self.rows)} problems; asked for {n}")
        return [Problem(msgs[-1]["content"], json.dumps(a["expected"]), a, self.name) for msgs, a in self.rows[:n]]

    def verdict(self, generated_text: str, problem: Problem) -> str:
        out = items_of(generated_text)
        return "malformed" if out is None else line_verdict(out, problem.answer)


def official_name(name: str) -> str | None:
    """"parallelbench:waiting_line/shuffle" -> "shuffle"; None for any other name."""
    prefix = "parallelbench:waiting_line/"
    return name[len(prefix):].replace("_", "-") if isinstance(name, str) and name.startswith(prefix) else None
