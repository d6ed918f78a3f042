"""Checkable tasks: synthetic families that generate problems per split, and data tasks read from files (GSM8K,
MATH-500, HumanEval ship under assets/tasks/); each grades answers (``verdict``)."""

from pathlib import Path

from engine.errors import ConfigError
from engine.tasks.arith import ArithTask
from engine.tasks.common import Problem, TaskBase
from engine.tasks.data import DataTask, shipped
from engine.tasks.mix import MixTask
from engine.tasks.parallelbench import LINE_TASKS, PUZZLES, ParallelMix, own_name, parallel_task
from engine.tasks.picks import PicksTask
from engine.tasks.story import StoryTask

TASKS = {**{t.name: t for t in (ArithTask, StoryTask, PicksTask, MixTask, ParallelMix)}, **LINE_TASKS, **PUZZLES}
_LOADED: dict[str, TaskBase] = {}      # data tasks by name, read once (a file named on the command line too)

__all__ = ["TASKS", "Problem", "TaskBase", "get_task", "load_task_file", "task_tokenizer"]


def get_task(name: str) -> TaskBase:
    """A synthetic task, a shipped data task, or one a command line has loaded (``load_task_file``)."""
    if isinstance(name, str) and name in _LOADED:     # a file the command line read takes its name's place
        return _LOADED[name]
    if isinstance(name, str) and name in TASKS:
        return TASKS[name]()
    if isinstance(name, str) and name.startswith("parallelbench:"):
        refuse_without_data(name)
    if isinstance(name, str) and (task := parallel_task(name)) is not None:
        return task
    if isinstance(name, str) and name not in _LOADED and name in shipped():
        _LOADED[name] = DataTask(shipped()[name])
    if not isinstance(name, str) or name not in _LOADED:
        raise ConfigError(f"unknown task {str(name)[:40]!r}; known: {', '.join(sorted(TASKS) + list(shipped()))}")
    return _LOADED[name]


def load_task_file(name_or_folder: str, allow_code: bool = False, data: str | None = None,
                   zero_shot: bool = False) -> str:
    """Command line only (the page names shipped tasks): read a data task, by its shipped name or from a folder
    with card.json and data.jsonl[.gz], with code execution allowed or not; or ParallelBench's own files for
    ``parallelbench:GROUP/NAME`` (``data``: its split folder or one task file; ``zero_shot``: without the rows'
    worked examples). Returns the name to bench it by."""
    if data:
        from engine.tasks.parallelbench_files import OfficialTask, official_name
        if official_name(name_or_folder) is None:
            raise ConfigError("--data goes with --task parallelbench:GROUP/NAME (the benchmark's own files, e.g. "
                              "parallelbench:waiting_line/copy, parallelbench:puzzle/sudoku_n4_12)")
        task = OfficialTask(official_name(name_or_folder), Path(data), zero_shot=zero_shot)
        _LOADED[task.name] = task
        return task.name
    if zero_shot:
        raise ConfigError("--zero-shot goes with --data (ParallelBench's own files)")
    if name_or_folder.startswith("parallelbench:"):
        refuse_without_data(name_or_folder)
    folder = shipped().get(name_or_folder) or Path(name_or_folder)
    if name_or_folder in TASKS or parallel_task(name_or_folder) is not None:
        return name_or_folder
    if not folder.is_dir():
        raise ConfigError(f"--task {name_or_folder[:80]!r}: not a task name nor a folder with card.json")
    task = DataTask(folder, allow_code=allow_code)
    _LOADED[task.name] = task
    return task.name


def refuse_without_data(name: str) -> None:
    """A benchmark's name is its own rows only: without its files, one line naming --data (and the generator here
    of that family, which has a name of its own)."""
    from engine.tasks.parallelbench_files import official_name
    if official_name(name) is None:
        raise ConfigError(f"unknown task {name[:80]!r}; ParallelBench's are parallelbench:GROUP/NAME with --data")
    near = own_name(name)
    raise ConfigError(f"{name[:80]} is ParallelBench's own task: give --data PATH (your copy of its data/output/test "
                      f"folder)" + (f"; Unmask's own generator of that family is --task {near}" if near else ""))


def task_tokenizer(task: TaskBase):
    """The closed-vocabulary tokenizer for a task. Arithmetic's words come first, in the embedded arithmetic
    model's order, so every tasks model shares its ids as a prefix (the tasks model starts from its weights)."""
    from engine.models.tokenizer import build_tokenizer  # needs transformers; the task code itself stays light
    return build_tokenizer(ArithTask().vocabulary(), extend=task.vocabulary())


def with_task_length(spec: str, task) -> str:
    """A data task's card names the generation length its answers need (GSM8K 256): a SPEC without its own
    gen_length gets it."""
    want = getattr(task, "card", {}).get("gen_length")
    if not want or "gen_length=" in spec:
        return spec
    return f"{spec}{',' if ':' in spec else ':'}gen_length={want}"
