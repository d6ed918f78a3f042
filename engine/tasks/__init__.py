"""Synthetic, checkable tasks. A task family generates problems per split and grades answers (``verdict``)."""

from engine.errors import ConfigError
from engine.tasks.arith import ArithTask
from engine.tasks.common import Problem, TaskBase
from engine.tasks.mix import MixTask
from engine.tasks.picks import PicksTask
from engine.tasks.story import StoryTask

TASKS = {t.name: t for t in (ArithTask, StoryTask, PicksTask, MixTask)}

__all__ = ["TASKS", "Problem", "TaskBase", "get_task", "task_tokenizer"]


def get_task(name: str) -> TaskBase:
    if not isinstance(name, str) or name not in TASKS:
        raise ConfigError(f"unknown task {str(name)[:40]!r}; known: {', '.join(sorted(TASKS))}")
    return TASKS[name]()


def task_tokenizer(task: TaskBase):
    """The closed-vocabulary tokenizer for a task. Arithmetic's words come first, in the embedded arithmetic
    model's order, so every tasks model shares its ids as a prefix (the tasks model starts from its weights)."""
    from engine.tokenizer import build_tokenizer  # needs transformers; the task code itself stays light
    return build_tokenizer(ArithTask().vocabulary(), extend=task.vocabulary())
