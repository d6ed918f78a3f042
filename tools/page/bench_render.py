"""Re-render cost of every view for a stored trace, server side, and the payload the page receives.

    python -m engine generate --model unmask-tasks-small --prompt "Tell a story about a yak named Finn." \
        --decoder ar --gen-length 256 --no-eos-stop --trace-out long.npz        # a 256-forward trace
    python -m tools.page.bench_render long.npz
The figures (and what the page sends: only the visible tab's views) are in docs/results.md.
Prints the median over repetitions for a scrub to a middle step, and the JSON bytes of all figures + HTML.
"""

from __future__ import annotations

import argparse
import json
import statistics

from engine.records.trace import Trace
from explorer.render import render_all
from tools.bench.clock import seconds


def measure(trace, reps: int = 15) -> dict:
    n = len(trace.records)
    render_all(trace, n // 2)  # warm-up: imports, plotly validators
    times = []
    for i in range(reps):
        took, out = seconds(lambda: render_all(trace, (i * 7) % n))
        times.append(took)
    payload = sum(len(o.encode()) if isinstance(o, str) else len(o.to_json()) for o in out.values())
    gen = len(trace.meta.token_ids)
    return dict(steps=n, generated_tokens=gen, median_ms=1e3 * statistics.median(times),
                max_ms=1e3 * max(times), payload_bytes=payload)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args(argv)
    try:
        trace = Trace.load(args.trace)
    except (OSError, ValueError) as e:
        ap.error(f"cannot read the trace {args.trace}: {e}")        # exit status 2, one line
    print(json.dumps(measure(trace, args.reps), indent=1))


if __name__ == "__main__":
    main()
