"""The real app on a loopback port for a benchmark: a scratch folder for its cache and log, its settings, and the
checkout it serves (this one, or another's: an earlier commit to compare against)."""

from __future__ import annotations

import contextlib
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tools.local_app import ROOT, running_app


@dataclass(frozen=True)
class App:
    url: str
    pid: int
    log: Path                        # the app's stdout and stderr


def checkout(app_dir: str = "") -> Path:
    """The checkout whose ``app.py`` to serve: ``app_dir`` (``--app-dir``) or this one."""
    return Path(app_dir).resolve() if app_dir else ROOT


def add_app_dir(ap) -> None:
    ap.add_argument("--app-dir", default="", help="serve another checkout's app.py (an earlier commit, to compare)")


@contextlib.contextmanager
def served(app_dir: str = "", start_s: float = 120, **env: str):
    """``python app.py`` of ``checkout(app_dir)`` with ``env`` on a free loopback port; yields an ``App``, stops it
    afterwards and removes its scratch folder."""
    with tempfile.TemporaryDirectory() as tmp, running_app(Path(tmp), checkout(app_dir), start_s, **env) as (url, p):
        yield App(url, p.pid, Path(tmp) / "app.log")
