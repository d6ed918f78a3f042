"""Progress of long runs (bench, experiments): tqdm's bar on a terminal, plain periodic lines on a pipe or log file
(a bar's carriage returns run together there)."""

from __future__ import annotations

import sys
import time


def progress(desc: str, every_s: float = 30.0):
    """A ``progress(done, total)`` callback for ``run_bench`` and friends."""
    if sys.stderr.isatty():
        from tqdm import tqdm
        bar = {}

        def tick(done: int, total: int) -> None:
            if "b" not in bar:
                bar["b"] = tqdm(total=total, desc=desc, unit="problem", file=sys.stderr)
            bar["b"].update(done - bar["b"].n)
            if done >= total:
                bar["b"].close()
        return tick
    state = {"t0": time.monotonic(), "last": float("-inf")}   # the first call prints, whatever the clock's origin

    def line(done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - state["last"] < every_s:
            return
        state["last"] = now
        rate = done / max(now - state["t0"], 1e-9)
        eta = (total - done) / rate if rate > 0 else float("inf")
        print(f"{desc}: {done}/{total} problems, {rate:.2f}/s, ETA {eta:.0f} s", file=sys.stderr, flush=True)
    return line
