"""Run a code task's tests on a generated completion, sandboxed (the ``code`` grader; command line only, with
``--allow-code-execution``; the public page never runs code).

What it guarantees, each held by the operating system rather than by Python:

* **Its own namespaces** (``unshare``): a new network namespace (no interface but a loopback that is down: no host,
  no outside address, no host loopback service can be reached), a new mount namespace, and a new PID namespace
  whose first process is the candidate's interpreter: when it ends, or the time limit kills it, every process it
  started ends with it (a daemon, a ``setsid`` child, a fork bomb's survivors): no orphan outlives the check.
* **An unprivileged user**: the candidate runs as ``nobody`` (uid 65534), with no capabilities and
  ``no_new_privs``, so it can write only where ``nobody`` may: its own temporary folder, and private empty
  tmpfs mounts laid over the machine's world-writable folders (/tmp, /var/tmp, /dev/shm, /run/lock), discarded
  afterwards. Nothing else of the machine can be written, deleted or chmodded.
* **Limits that hold** (set before it starts, and enforced for a non-root user): address space (1 GiB), CPU time,
  file size (1 MiB, stdout and stderr included), processes of ``nobody`` (64), open files, and a wall-clock
  timeout after which the whole process group is killed.
* **No leak in the verdict**: a failure is reported as its exception's type and the line of the check program
  that raised it, never the exception's message or the program's output.

What it does not guarantee: the candidate can *read* what ``nobody`` may read (world-readable files such as
/etc/passwd); it shares the machine's kernel (a kernel exploit escapes any namespace); a candidate can fake its
own result from inside the process (``os._exit(0)`` before the tests run) — the verdict protects the machine, not
the benchmark from a hostile model. As human-eval and lm-eval say: run untrusted code only in a disposable
container. Without root, or where the kernel refuses namespaces, it refuses to run with one line saying why.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from engine.errors import ConfigError

TIMEOUT_S = 10.0
MEMORY = 1 << 30          # bytes of address space
FILE_SIZE = 1 << 20       # bytes any one file may grow to (its output files too)
NOBODY = 65534
WRITABLE = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")    # world-writable: each gets a private empty tmpfs

# Runs inside the sandbox as nobody: the check program, then one JSON line (the exception's type and line only).
RUNNER = r'''
import json, os, traceback
src = open("candidate.py").read()
try:
    exec(compile(src, "candidate.py", "exec"), {"__name__": "__main__"})
    verdict = {"ok": True}
except BaseException as e:
    frames = [f.lineno for f in traceback.extract_tb(e.__traceback__) if f.filename == "candidate.py"]
    verdict = {"ok": False, "type": type(e).__name__, "line": frames[-1] if frames else 0}
os.write(int(os.environ["UNMASK_VERDICT_FD"]), json.dumps(verdict).encode())
os._exit(0 if verdict["ok"] else 1)
'''

# Runs inside the new namespaces as root: private mounts, then nobody, then the runner.
LAUNCH = ("mount --make-rprivate / && for d in {dirs}; do [ -d $d ] && mount -t tmpfs -o size=1m,mode=1777 tmpfs "
          "$d; done; exec setpriv --reuid={uid} --regid={uid} --clear-groups --inh-caps=-all --no-new-privs "
          "{python} -I -c \"$UNMASK_RUNNER\"")


def available() -> str | None:
    """None when the sandbox can run here; else why not (one line)."""
    if not sys.platform.startswith("linux"):
        return "the code sandbox needs Linux namespaces"
    if os.geteuid() != 0:
        return ("the code sandbox needs root to enter its namespaces and drop to an unprivileged user; run the "
                "bench as root inside a disposable container")
    missing = [c for c in ("unshare", "setpriv", "mount") if shutil.which(c) is None]
    if missing:
        return f"the code sandbox needs {', '.join(missing)} (util-linux)"
    return None


def _limits(timeout: float):
    def apply():
        os.setsid()                                  # its own session and process group: killed as one
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
        resource.setrlimit(resource.RLIMIT_CPU, (int(timeout) + 1, int(timeout) + 1))
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE, FILE_SIZE))
        resource.setrlimit(resource.RLIMIT_NPROC, (64, 64))     # holds once the candidate is nobody
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    return apply


def program(row: dict, completion: str) -> str:
    """The check program of a HumanEval-style row: prompt + completion + its tests + check(entry point)."""
    return f"{row['prompt']}{completion}\n\n{row['test']}\n\ncheck({row['entry_point']})\n"


def run_tests(row: dict, completion: str, timeout: float = TIMEOUT_S) -> str:
    """"valid" when the row's tests pass on the completion, else "failed: <exception type> (line N)", "failed:
    killed by signal S (a limit)" or "timed out". Refuses (``ConfigError``) where the sandbox cannot run."""
    why = available()
    if why:
        raise ConfigError(why)
    with tempfile.TemporaryDirectory(prefix="unmask-sandbox-") as tmp:
        os.chown(tmp, NOBODY, NOBODY)
        Path(tmp, "candidate.py").write_text(program(row, completion), encoding="utf-8")
        code, verdict = _run(Path(tmp), timeout)
    if code is None:
        return "timed out"
    if verdict.get("ok") is True and code == 0:
        return "valid"
    if code < 0:
        return f"failed: killed by signal {-code} (a limit)"
    kind = str(verdict.get("type", "no result"))
    kind = kind if kind.isidentifier() and len(kind) <= 60 else "an exception"
    line = verdict.get("line") if isinstance(verdict.get("line"), int) else 0
    return f"failed: {kind}" + (f" (line {line})" if line else "")


def _run(folder: Path, timeout: float) -> tuple[int | None, dict]:
    """(exit status or None on the time limit, the runner's verdict) of one sandboxed run in ``folder``."""
    cmd = ["unshare", "--net", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc", "sh", "-c",
           LAUNCH.format(dirs=" ".join(WRITABLE), uid=NOBODY, python=sys.executable)]
    read, write = os.pipe()
    with open(folder / "out.txt", "wb") as out:
        os.chown(folder / "out.txt", NOBODY, NOBODY)
        proc = subprocess.Popen(cmd, cwd=folder, env={"UNMASK_RUNNER": RUNNER, "UNMASK_VERDICT_FD": str(write),
                                     "PATH": "/usr/sbin:/usr/bin:/bin"},
                                stdin=subprocess.DEVNULL, stdout=out, stderr=out, pass_fds=(write,),
                                preexec_fn=_limits(timeout))
        os.close(write)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)       # unshare dies; --kill-child ends the namespace's PID 1
            proc.wait()
            code = None
    with os.fdopen(read, "rb") as r:
        raw = r.read(4096)
    try:
        verdict = json.loads(raw.decode()) if raw else {}
    except ValueError:
        verdict = {}
    return code, verdict if isinstance(verdict, dict) else {}
