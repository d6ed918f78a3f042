"""Where a process writes its export files: one private folder per process, size-capped, removed at exit, and
swept of dead processes' folders at start (a killed server cannot clean up after itself).

    unmask-export-<pid>-<random>/    0700, under the system temp directory
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

from engine.records.frozen import FrozenTrace
from explorer.export import export_files, export_gif

log = logging.getLogger(__name__)
PREFIX = "unmask-export-"
CAP_BYTES = 64 * 2**20        # a visitor's exports are small (≤ 1.4 MB per run); older ones go first
LEGACY_AGE_S = 3600           # folders of the old naming (no pid) are swept once they are this old


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:    # another user's live process
        return True
    return True


def stamp(path: str) -> tuple | None:
    """A file's (size, modification time in ns), None when it is gone (the cap removed it)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_size, st.st_mtime_ns


def sweep_leftovers(root: Path) -> int:
    """Remove export folders of processes that are gone; returns how many were removed."""
    removed = 0
    for d in root.glob(PREFIX + "*"):
        if not d.is_dir() or d.is_symlink():
            continue
        m = re.match(re.escape(PREFIX) + r"(\d+)-", d.name)
        dead = (not pid_alive(int(m.group(1))) if m
                else time.time() - d.stat().st_mtime > LEGACY_AGE_S)
        if dead and (not m or int(m.group(1)) != os.getpid()):
            shutil.rmtree(d, ignore_errors=True)
            removed += 1
    return removed


class ExportDir:
    def __init__(self, root: str | None = None, cap_bytes: int = CAP_BYTES):
        base = Path(root or tempfile.gettempdir())
        n = sweep_leftovers(base)
        if n:
            log.info("removed %d export folder(s) left by earlier processes", n)
        self.path = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=base))   # created 0700
        self.cap_bytes = cap_bytes
        self.gifs: dict[str, str] = {}          # a trace's content hash -> its GIF
        self.shared: dict[int, tuple] = {}      # a frozen trace's id -> (the trace, [(path, its stamp)])
        atexit.register(self.remove)

    def write(self, trace) -> list[str]:
        """The run's JSON, CSV and npz (``explorer.export``), then the cap. A shared, frozen trace (a pre-baked
        example, shown to every visitor who opens the page) is written once: its files are served again while they
        stand as written (a page open wrote them each time: 0.13-0.16 s of the server's 0.9 CPU-seconds)."""
        shared = isinstance(trace, FrozenTrace)
        kept = self.shared.get(id(trace)) if shared else None
        if kept is not None and kept[0] is trace and all(stamp(p) == t for p, t in kept[1]):
            return [p for p, _ in kept[1]]
        paths = export_files(trace, self.path)
        self.enforce_cap()
        if shared:
            self.shared[id(trace)] = (trace, [(p, stamp(p)) for p in paths])
        return paths

    def write_gif(self, trace, budget_s: float | None = None, should_stop=None) -> str | None:
        """The run's GIF, made once: a second request for the same trace gets the same file (while it lasts); None
        when ``should_stop()`` ended it (its visitor left)."""
        import hashlib
        key = hashlib.sha256(trace.to_bytes()).hexdigest()
        done = self.gifs.get(key)
        if done is not None and Path(done).is_file():
            return done
        path = export_gif(trace, self.path, budget_s, should_stop)
        if path is None:
            return None
        self.gifs[key] = path
        self.enforce_cap()
        return path

    def enforce_cap(self) -> None:
        """Delete the oldest files until the folder is within its cap."""
        files = sorted((f for f in self.path.iterdir() if f.is_file()), key=lambda f: f.stat().st_mtime)
        total = sum(f.stat().st_size for f in files)
        while files and total > self.cap_bytes:
            f = files.pop(0)
            total -= f.stat().st_size
            f.unlink(missing_ok=True)

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
