"""Clean exits of the command line: the same ``python -m engine bench ... --json > out.json`` many times, a few
at once, each checked to exit 0 with its JSON whole (issue 74: 3 of about 90 such runs aborted with SIGABRT,
"terminate called without an active exception", while other work loaded the cores, and lost their JSON).

    python -m tools.bench_exits                      # 50 runs, 2 at a time, on the embedded model
    python -m tools.bench_exits --runs 50 --load 2   # beside 2 processes spinning a core each
    python -m tools.bench_exits --app-dir /tmp/old   # another checkout's engine (an earlier commit: before)

Prints one line: runs, exits other than 0 (by code), JSON not whole, and the wall time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMAND = ["-m", "engine", "bench", "--task", "mix", "--decoder", "threshold:tau=0.9,block_size=8", "--batch", "1",
           "--json"]


def one_run(n: int, root: Path = ROOT) -> tuple[int, bool, str]:
    """(exit code, its stdout a whole JSON list of rows, its stderr's last line) of one bench run of n problems."""
    out = subprocess.run([sys.executable, *COMMAND, "--n", str(n)], cwd=root, capture_output=True, text=True,
                         timeout=600)
    try:
        whole = isinstance(json.loads(out.stdout), list)
    except ValueError:
        whole = False
    return out.returncode, whole, (out.stderr.strip().splitlines() or [""])[-1]


@contextlib.contextmanager
def cpu_load(processes: int):
    """``processes`` busy loops beside the runs (the cores loaded, as when the aborts were seen)."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)]
    try:
        yield
    finally:
        for p in spinners:
            p.kill()
            p.wait()


def runs(count: int, n: int = 2, parallel: int = 2, load: int = 0, root: Path = ROOT) -> dict:
    """``count`` runs, ``parallel`` at a time: their exit codes counted, the runs whose JSON was not whole, and the
    last stderr line of each failed run."""
    t0 = time.monotonic()
    with cpu_load(load), ThreadPoolExecutor(parallel) as pool:
        results = list(pool.map(lambda _: one_run(n, root), range(count)))
    return dict(runs=count, codes=Counter(rc for rc, _, _ in results), broken=sum(not w for _, w, _ in results),
                errors=sorted({err for rc, w, err in results if rc or not w}), seconds=time.monotonic() - t0)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--n", type=int, default=2, help="problems per run (the issue's command: 200)")
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--load", type=int, default=0, help="busy processes beside the runs")
    ap.add_argument("--app-dir", default="", help="run another checkout's engine (an earlier commit: before)")
    args = ap.parse_args(argv)
    res = runs(args.runs, args.n, args.parallel, args.load, Path(args.app_dir) if args.app_dir else ROOT)
    failed = sum(k for rc, k in res["codes"].items() if rc)
    print(f"{res['runs']} runs (--n {args.n}, {args.parallel} at a time, {args.load} busy processes beside): "
          f"{failed} exited other than 0 {dict(res['codes'])}, {res['broken']} JSON not whole, "
          f"{res['seconds']:.0f} s; {res['errors'] or 'no errors'}")


if __name__ == "__main__":
    main()
