"""Where a measurement came from, stored beside its numbers: every benchmark and experiment writes its JSON here.

A record is ``{"provenance": {...}, **numbers}`` (numbers that are a list go under ``"rows"``). ``provenance``
holds what a reader needs to trust or remake the figures: the commit and whether the tree had changes the commit
lacks, the command line, the libraries' versions, the machine (CPU model, cores, load average and the reference
loop's time (``loop_ms``) when the process started and when it wrote; the GPU's name and driver where one is used)
and the date. ``python -m tools.results`` builds the docs' tables from these records and marks a table whose
record is older than the code it measures.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIBRARIES = ("torch", "transformers", "tokenizers", "numpy", "gradio", "plotly")
_LOAD_AT_START = os.getloadavg()          # imported with the benchmark, so this is the load it started under


def loop_ms(n: int = 200_000, tries: int = 5) -> float:
    """How fast one core of this machine runs Python now: the fastest of ``tries`` runs of a fixed loop of ``n``
    additions, in ms (about 0.1 s in all). The load average misses a shared host's slow days: one 2-core machine of
    this project ran the same suite in 758 s one day and 1 161 s another, one test of it in 23 s and 45 s; figures
    of two records compare only at similar loop times."""
    best = float("inf")
    for _ in range(tries):
        t, total = time.perf_counter(), 0
        for i in range(n):
            total += i
        best = min(best, time.perf_counter() - t)
    return round(best * 1e3, 1)


LOOP_MS_AT_START = loop_ms()            # the same: the speed the benchmark (or the test run) started at


def git(*args: str) -> str:
    try:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def versions() -> dict:
    found = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu() -> dict | None:
    """The GPU's name, memory and driver where torch is loaded and sees one; None otherwise (a CPU run, or a
    benchmark that never imported torch: importing it here would only cost the benchmark time)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(0)
    driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                            capture_output=True, text=True).stdout.strip() if _has("nvidia-smi") else None
    return dict(name=props.name, memory_gib=round(props.total_memory / 2**30, 1), cuda=torch.version.cuda,
                driver=driver or None, count=torch.cuda.device_count())


def _has(program: str) -> bool:
    return any(Path(d, program).exists() for d in os.environ.get("PATH", "").split(os.pathsep))


def machine() -> dict:
    return dict(cpu=cpu_model(), cores=os.cpu_count(), load_at_start=[round(x, 2) for x in _LOAD_AT_START],
                load_at_end=[round(x, 2) for x in os.getloadavg()], loop_ms_at_start=LOOP_MS_AT_START,
                loop_ms_at_end=loop_ms(), system=platform.platform(), gpu=gpu())


def provenance(argv: list[str] | None = None, commit: str | None = None) -> dict:
    """This process's provenance, taken now (the load at its end is the load when it writes). ``commit`` names the
    commit measured where the copy has no ``.git`` (a GPU machine gets the working tree only); ``clean`` is then
    unknown (None)."""
    head = git("rev-parse", "HEAD") or None
    clean = None if commit and commit != head else not git("status", "--porcelain", "--untracked-files=no")
    return dict(commit=commit or head, clean=clean if head else None,
                command=" ".join(["python", *_program()] + list(sys.argv[1:] if argv is None else argv)),
                versions=versions(), machine=machine(),
                date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))


def _program() -> list[str]:
    """The program as typed: ``-m tools.x`` for a module run with -m, else the script's path (or ``-c``)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None:
        return ["-m", spec.name.removesuffix(".__main__")]
    return [sys.argv[0] if sys.argv and sys.argv[0] else "-c"]


def stamp(numbers, argv: list[str] | None = None, commit: str | None = None) -> dict:
    """The record: ``numbers`` (a dict, or a list kept under ``rows``) with this process's provenance first."""
    body = numbers if isinstance(numbers, dict) else {"rows": numbers}
    return {"provenance": provenance(argv, commit), **{k: v for k, v in body.items() if k != "provenance"}}


def write(path, numbers, argv: list[str] | None = None, commit: str | None = None) -> Path:
    """Write ``stamp(numbers)`` as JSON at ``path`` (folders made) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(stamp(numbers, argv, commit), indent=1, default=str) + "\n")
    return path
