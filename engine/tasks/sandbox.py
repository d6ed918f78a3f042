"""Run a code task's tests on a generated completion, sandboxed (the ``code`` grader; command line only).

Each candidate runs in its own Python process (``-I``: no user site, no environment), in a fresh temporary
directory that is removed afterwards, with limits set before it starts (``resource``: address space, CPU seconds,
file size, processes) and a wall-clock timeout. Inside, before the candidate runs, a guard takes away the network
(``socket``), process creation (``os.system``, ``subprocess``, ``fork``) and writing or deleting outside the
directory. This is the same protection human-eval and lm-eval ask for, plus the limits; it is not a container:
``--allow-code-execution`` is required, and the public page never runs code.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
from pathlib import Path

TIMEOUT_S = 10.0
MEMORY = 1 << 30          # bytes of address space
FILE_SIZE = 1 << 20       # bytes any one file may grow to

GUARD = r'''
import builtins, os, socket, subprocess, shutil, sys
_here = os.path.realpath(os.getcwd())
def _refuse(*a, **k):
    raise PermissionError("not allowed in the sandbox")
def _inside(path):
    return os.path.realpath(os.fspath(path)).startswith(_here + os.sep)
_open = builtins.open
def _guarded_open(file, mode="r", *a, **k):
    if any(c in mode for c in "wax+") and not (isinstance(file, (str, bytes, os.PathLike)) and _inside(file)):
        raise PermissionError(f"writing outside the sandbox: {file!r}")
    return _open(file, mode, *a, **k)
builtins.open = _guarded_open
socket.socket = socket.create_connection = socket.socketpair = _refuse
for name in ("system", "popen", "fork", "forkpty", "execv", "execve", "execvp", "spawnv", "kill", "killpg",
             "remove", "unlink", "rmdir", "removedirs", "rename", "renames", "replace", "chmod", "chown",
             "truncate", "putenv", "chdir"):
    if hasattr(os, name):
        setattr(os, name, _refuse)
subprocess.Popen = subprocess.run = subprocess.call = subprocess.check_output = _refuse
shutil.rmtree = shutil.move = _refuse
del builtins, socket, subprocess, shutil
'''


def _limits(timeout: float):
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
        resource.setrlimit(resource.RLIMIT_CPU, (int(timeout) + 1, int(timeout) + 1))
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE, FILE_SIZE))
        resource.setrlimit(resource.RLIMIT_NPROC, (64, 64))
    return apply


def program(row: dict, completion: str) -> str:
    """The check program of a HumanEval-style row: prompt + completion + its tests + check(entry point)."""
    return f"{row['prompt']}{completion}\n\n{row['test']}\n\ncheck({row['entry_point']})\n"


def run_tests(row: dict, completion: str, timeout: float = TIMEOUT_S) -> str:
    """"valid" when the row's tests pass on the completion, else "failed: <why>" or "timed out"."""
    with tempfile.TemporaryDirectory(prefix="unmask-sandbox-") as tmp:
        Path(tmp, "guard.py").write_text(GUARD, encoding="utf-8")
        Path(tmp, "candidate.py").write_text(program(row, completion), encoding="utf-8")
        runner = "exec(open('guard.py').read()); exec(compile(open('candidate.py').read(), 'candidate.py', 'exec'))"
        try:
            done = subprocess.run([sys.executable, "-I", "-c", runner], cwd=tmp, env={}, capture_output=True,
                                  text=True, timeout=timeout, preexec_fn=_limits(timeout), stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return "timed out"
    if done.returncode == 0:
        return "valid"
    if done.returncode < 0:
        return f"failed: killed by signal {-done.returncode} (a limit)"
    last = (done.stderr.strip().splitlines() or ["exit status %d" % done.returncode])[-1]
    return f"failed: {last[:200]}"
