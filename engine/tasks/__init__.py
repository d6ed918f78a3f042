"""Synthetic, checkable tasks. A task family generates problems per split and checks answers."""

from engine.tasks.arith import ArithTask

TASKS = {"arith": ArithTask}


def get_task(name: str):
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; known: {', '.join(sorted(TASKS))}")
    return TASKS[name]()
