"""Scrubbing a recorded trace in the page against scrubbing the page's own run of as many forwards, in one browser
on one app (a benchmark, not a test): ◀ / ▶ redraw times as ``tools.page.bench_page`` measures them.

    python -m tools.record_examples.bench_scrub          # a 256-forward recorded loop vs llada's 256-forward run

The recorded trace is the worked example's loop (gen 256, blocks of 8, one token a forward) on the embedded
model; the page's own run is ``bench_page``'s ``LONG`` setting, decoded by the app.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from tools.bench.app import served
from tools.bench.browser import chromium
from tools.page.bench_page import DONE, LONG, PROMPT, REDRAW, url_for
from tools.record_examples import llada_generate


def redraws(pg, url: str) -> tuple[int, list[float]]:
    """(forwards, 20 ◀ / ▶ redraw times in ms) of the run a URL opens, from its middle step."""
    pg.goto(url)
    pg.wait_for_function(DONE, arg="", timeout=900_000)
    n = pg.evaluate("() => window.__umScrub.run.n")
    pg.evaluate("() => window.__umScrub.go(Math.floor(window.__umScrub.run.n / 2))")
    return n, pg.evaluate(REDRAW, None)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        traces = Path(tmp) / "traces"
        traces.mkdir()
        llada_generate.main(["--out", str(traces / "long.npz"), "--gen-length", "256", "--block-length", "8",
                             "--steps", "256"])
        with served(UNMASK_TRACES=str(traces)) as app, chromium() as browser:
            pg = browser.new_page(viewport={"width": 1500, "height": 1100})
            redraws(pg, app.url + "?trace=long")                               # warm-up
            rows = {"recorded": redraws(pg, app.url + "?trace=long"),
                    "own": redraws(pg, url_for(app.url, LONG, PROMPT))}
    for name, (n, times) in rows.items():
        print(f"{name:8s} {n} forwards: ◀ / ▶ redraw median {statistics.median(times):.1f} ms, "
              f"max {max(times):.1f}")
    ratio = statistics.median(rows["recorded"][1]) / statistics.median(rows["own"][1])
    print(f"recorded / own redraw median: {ratio:.2f}")


if __name__ == "__main__":
    main()
