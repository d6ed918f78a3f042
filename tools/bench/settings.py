"""``UNMASK_*`` settings switched for a block: the engine reads them per round (the static path, compile, layout),
so one process can compare settings interleaved, without a restart between them."""

from __future__ import annotations

import contextlib
import os


@contextlib.contextmanager
def settings(**env: str):
    """These settings for the block's duration; the previous values (or their absence) afterwards."""
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)


def under(env: dict, fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` under the settings ``env``."""
    with settings(**env):
        return fn(*args, **kwargs)
