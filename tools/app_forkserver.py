"""Apps started as forks of one process that has already imported torch and transformers: a fork server (the
name and idea of ``multiprocessing``'s), one per process that asks for it (a test worker), for the test modules
that start an app with settings of their own (nine starts a run). Those two libraries are 5 of the 8.4
CPU-seconds a start spends importing on this project's 2-core machines: a forked start took 5.6-6.2 CPU-seconds
against 11.2 for a fresh interpreter, measured one after the other.

Only third-party libraries that read no setting of the app's at import are loaded before the fork. Gradio reads
``GRADIO_TEMP_DIR`` when it is imported (the app sets it to a folder of its own first) and the app's modules read
``UNMASK_*``, so both are imported by each fork, in the order ``python app.py`` imports them. Each fork runs
``app.py`` as ``python app.py`` would: its own session, environment, working directory, ``sys.argv``/``sys.path``
and log, and the interpreter's own exit (``atexit``) when the app returns. ``tools.local_app.running_app(...,
forked=True)`` starts one; the default there stays a fresh interpreter (the Space's own start)."""

from __future__ import annotations

import json
import os
import runpy
import signal
import subprocess
import sys
import threading
import time

PRELOAD = ("numpy", "torch", "transformers.modeling_utils", "transformers.models.llama.modeling_llama",
           "transformers.models.qwen2.modeling_qwen2", "transformers.models.qwen3.modeling_qwen3",
           "safetensors.torch", "tokenizers", "plotly.graph_objects")


def serve() -> None:
    """The server's loop: one JSON request per line on stdin (``cwd``, ``env``, ``log``), one ``{"pid": ...}``
    line back per fork; ends when stdin closes (the process that started it is gone)."""
    for name in PRELOAD:
        __import__(name)
    # a fork copies one thread: a library that had started another would leave its lock state behind
    assert threading.active_count() == 1, [t.name for t in threading.enumerate()]
    early = sorted(m for m in sys.modules if m.split(".")[0] in ("gradio", "engine", "explorer", "app"))
    assert not early, f"read settings at import, so imported by each fork, not before: {early[:5]}"
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)           # forks are reaped by the kernel: no zombies to wait on
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            run_app(**request)                              # never returns: the fork exits as an interpreter does
        print(json.dumps({"pid": pid}), flush=True)


def run_app(cwd: str, env: dict, log: str) -> None:
    """In the fork: ``python app.py`` in ``cwd`` with exactly ``env``, stdout and stderr to ``log``."""
    os.setsid()                                             # its own session: a signal to the server is not its
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)           # the app waits on its own children (the sandbox)
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)            # the server's request pipe is not the app's
    os.dup2(out, 1)
    os.dup2(out, 2)
    sys.stdin = open(0, closefd=False)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.argv, sys.path[0] = ["app.py"], cwd
    runpy.run_path("app.py", run_name="__main__")
    raise SystemExit(0)                                     # through serve(): the interpreter's exit, atexit and all


class Forked:
    """A started fork, as ``running_app`` uses a ``subprocess.Popen``: its pid, ``poll``, ``terminate``,
    ``kill`` and ``wait``. It is the server's child, not ours, so its exit status is not known: ``poll`` gives
    -1 once it has gone."""

    def __init__(self, pid: int):
        self.pid = pid

    def poll(self) -> int | None:
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                return -1 if f.read().rsplit(")", 1)[1].split()[0] == "Z" else None
        except FileNotFoundError:
            return -1

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, sig: int) -> None:
        try:
            os.kill(self.pid, sig)
        except ProcessLookupError:
            pass

    def wait(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"app.py (pid {self.pid})", timeout)
            time.sleep(0.05)
        return -1


_SERVER: subprocess.Popen | None = None


def fork_app(cwd: str, env: dict, log: str) -> Forked:
    """``app.py`` in ``cwd`` with ``env``, forked from this process's fork server (started on first use)."""
    global _SERVER
    if _SERVER is None or _SERVER.poll() is not None:
        _SERVER = subprocess.Popen([sys.executable, "-m", "tools.app_forkserver"], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, text=True, cwd=cwd)
        assert json.loads(_SERVER.stdout.readline()) == {"ready": True}, "the fork server did not start"
    _SERVER.stdin.write(json.dumps(dict(cwd=cwd, env=env, log=log)) + "\n")
    _SERVER.stdin.flush()
    return Forked(json.loads(_SERVER.stdout.readline())["pid"])


if __name__ == "__main__":
    serve()
