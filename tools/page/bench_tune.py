"""Tune by eye against another commit: τ dragged over each checkout's opening example (``bench_ux.tune_by_eye``:
11 input events, 0.9 down to 0.1), both apps up at once and read by one Chromium, rounds interleaved (ABBA), each
round's median per input event paired with the other's. A benchmark, not a test: it prints the ratio of the two
medians and a two-sided sign test over the rounds.

    git archive BASE | tar -x -C /tmp/base
    python -m tools.page.bench_tune --against /tmp/base [--rounds 16] [--out results/bench_tune.json]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from engine.harness.stats import mcnemar
from tools.bench.app import served
from tools.bench.browser import chromium
from tools.page import bench_ux as ux
from tools import provenance

ROOT = Path(__file__).resolve().parents[2]


def measure(against: Path, rounds: int) -> dict:
    out = {"this": [], "against": []}
    with served() as here, served(str(against)) as there, chromium() as browser:
        pages = {}
        for name, url in (("this", here.url), ("against", there.url)):
            pages[name] = browser.new_page(viewport={"width": 1500, "height": 1100})
            ux.opened(pages[name], url)
        for r in range(rounds):
            for name in (("this", "against") if r % 4 in (0, 3) else ("against", "this")):   # ABBA
                res = ux.tune_by_eye(pages[name])
                out[name].append(dict(median_ms=res["median_ms"], marks=res["marks"], requests=res["requests"]))
    return out


def summary(res: dict) -> dict:
    a, b = ([r["median_ms"] for r in res[k]] for k in ("this", "against"))
    slower = sum(x > y for x, y in zip(a, b))
    faster = sum(x < y for x, y in zip(a, b))
    return dict(rounds=len(a), this_ms=statistics.median(a), against_ms=statistics.median(b),
                ratio=statistics.median(a) / statistics.median(b),
                paired_difference_ms=statistics.median(x - y for x, y in zip(a, b)),
                slower_rounds=slower, faster_rounds=faster, sign_test_p=mcnemar(slower, faster),
                marks=(res["this"][0]["marks"], res["against"][0]["marks"]),
                requests=sum(r["requests"] for k in res for r in res[k]))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--against", required=True, help="another checkout's root (its app.py and assets)")
    ap.add_argument("--rounds", type=int, default=16)
    ap.add_argument("--out", default=str(ROOT / "results" / "bench_tune.json"))
    args = ap.parse_args(argv)
    res = measure(Path(args.against).resolve(), args.rounds)
    s = summary(res)
    provenance.write(args.out, dict(rounds=res, summary=s), argv)
    print(f"τ drag, median per input event: {s['this_ms']:.1f} ms here ({s['marks'][0]} cells marked at 0.1) "
          f"against {s['against_ms']:.1f} ms ({s['marks'][1]} cells): {s['ratio']:.2f}×, paired difference "
          f"{s['paired_difference_ms']:+.1f} ms; slower in {s['slower_rounds']} of {s['rounds']} rounds, faster in "
          f"{s['faster_rounds']} (sign test p = {s['sign_test_p']:.3f}); {s['requests']} requests")


if __name__ == "__main__":
    main()
