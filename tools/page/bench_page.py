"""The page at the engine's speed, measured in Chromium: a live run in the page against the same decode through
the ``decode`` API, the longest main-thread task while it streams, ◀ / ▶ redraw times and play speed on a
256-forward trace, and text overflow. A benchmark, not a test: it prints ratios measured in one process.

    python -m tools.page.bench_page [--out results/bench_page.json]

Starts the app on a free local port with a fresh trace cache (so no page run is a cache hit), and Debian's
Chromium through Playwright (both as for the browser tests).
"""

from __future__ import annotations

import statistics
import sys
import time
from urllib.parse import urlencode

from engine.catalogue.spec import parse_spec
from tools.bench.app import served
from tools.bench.browser import chromium
from tools.bench.report import bench_main

PROMPT = "Tell a story about a yak named Finn."
OPENER = "Tell a story about a fox named Iris."     # opens the setting by its link before the timed run
SETTINGS = ("llada:block_size=8,steps=8", "simsd:block_size=8", "s2d2:block_size=8")
LONG = "llada:block_size=8,steps=8,gen_length=256,stop_at_eos=false"
# long tasks (> 50 ms) with their start, and when the first streamed frame of a run appeared
LONGTASKS = """window.__long = []; new PerformanceObserver(l => l.getEntries().forEach(e => window.__long.push(
  [e.startTime, e.duration]))).observe({type: 'longtask', buffered: true});
new MutationObserver(() => { if (window.__streamStart === undefined &&
  document.querySelector("#text .um-text[data-finished='0']")) window.__streamStart = performance.now(); })
  .observe(document, {childList: true, subtree: true});"""
STREAM_LONGEST = """() => { const t0 = window.__streamStart, out = window.__long.filter(e => t0 !== undefined && e[0] >= t0);
  return [t0 !== undefined, Math.max(0, ...out.map(e => e[1]))]; }"""
DONE = "(before) => { const t = document.querySelector('#text .um-text'); return t && t.dataset.run !== before && " \
       "t.dataset.finished === '1' && window.__umScrub && window.__umScrub.run; }"
REDRAW = """async (id) => { const f = () => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const out = []; for (let i = 0; i < 20; i++) { const t = performance.now();
  document.getElementById(i % 2 ? 'next' : 'prev').click(); await f(); out.push(performance.now() - t); }
  return out; }"""


def url_for(base: str, spec: str, prompt: str) -> str:
    name, params = parse_spec(spec)
    q = {k: (int(v) if isinstance(v, bool) else v) for k, v in params.items()}
    return base + "?" + urlencode(dict(q, decoder=name, prompt=prompt))


def api_seconds(base: str, spec: str, prompt: str) -> float:
    from gradio_client import Client
    client = Client(base, verbose=False)
    t0 = time.perf_counter()
    client.predict(prompt, spec, api_name="/decode")
    return time.perf_counter() - t0


def page_run(pg, base: str, spec: str, prompt: str) -> dict:
    """A live run as a visitor starts it: the setting is opened by its link on another prompt, then the prompt is
    typed and Run clicked, timed until the finished run is drawn, every view once. The longest main-thread task
    counts from that run's first streamed frame on."""
    pg.goto(url_for(base, spec, OPENER))
    pg.wait_for_function(DONE, arg="example", timeout=600_000)
    before = pg.evaluate("() => window.__umScrub.run.run")
    pg.fill("#prompt textarea", prompt)
    pg.evaluate("() => { window.__streamStart = undefined; window.__long = []; }")
    t0 = time.perf_counter()
    pg.click("#run")
    pg.wait_for_function(DONE, arg=before, timeout=600_000)
    took = time.perf_counter() - t0
    streamed, longest = pg.evaluate(STREAM_LONGEST)
    return dict(page_s=took, streamed=streamed, longest_task_ms=longest)


def scrubbing(pg, base: str) -> dict:
    pg.goto(url_for(base, LONG, PROMPT))
    pg.wait_for_function(DONE, arg="example", timeout=600_000)
    n = pg.evaluate("() => window.__umScrub.run.n")
    pg.evaluate("() => window.__umScrub.go(Math.floor(window.__umScrub.run.n / 2))")
    times = pg.evaluate(REDRAW, None)
    pg.evaluate("() => window.__umScrub.go(1)")
    pg.click("#play")
    t0 = time.perf_counter()
    pg.wait_for_timeout(3000)
    steps = pg.evaluate("() => window.__umScrub.step") - 1
    rate = steps / (time.perf_counter() - t0)
    pg.click("#play")
    over = pg.evaluate("() => [...document.querySelectorAll('#text *, #candidates *, #summary *')].filter(e => "
                       "e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX === 'visible').length")
    return dict(steps=n, redraw_median_ms=statistics.median(times), redraw_max_ms=max(times), play_steps_per_s=rate,
                overflowing_elements=over)


def measure() -> dict:
    rows = []
    with served() as app, chromium() as browser:
        base = app.url
        pg = browser.new_page(viewport={"width": 1500, "height": 1100})
        pg.add_init_script(LONGTASKS)
        pg.goto(base)                                   # warm-up: the browser's cache, the app's first renders
        pg.wait_for_selector("#text .um-text", timeout=120_000)
        api_seconds(base, "threshold", PROMPT)
        for spec in SETTINGS:
            api = api_seconds(base, spec, PROMPT)
            row = dict(spec=spec, api_s=api, **page_run(pg, base, spec, PROMPT))
            row["ratio"] = row["page_s"] / api
            row["target_met"] = row["page_s"] <= 1.3 * api + 2 and row["longest_task_ms"] <= 200
            rows.append(row)
            print(f"{spec}: API {api:.2f} s, page {row['page_s']:.2f} s ({row['ratio']:.2f}x), longest task "
                  f"{row['longest_task_ms']:.0f} ms", file=sys.stderr)
        scrub = scrubbing(pg, base)
    return dict(prompt=PROMPT, runs=rows, scrub=dict(spec=LONG, **scrub))


def table(res: dict) -> str:
    lines = ["| setting | `decode` API (s) | live run in the page (s) | page / API | target ≤ 1.3×API + 2 s | "
             "longest main-thread task (ms) |", "|---|---|---|---|---|---|"]
    for r in res["runs"]:
        lines.append(f"| `{r['spec']}` | {r['api_s']:.2f} | {r['page_s']:.2f} | {r['ratio']:.2f} | "
                     f"{'met' if r['page_s'] <= 1.3 * r['api_s'] + 2 else 'missed'} | {r['longest_task_ms']:.0f} |")
    s = res["scrub"]
    lines += ["", f"Scrubbing a {s['steps']}-forward trace (`{s['spec']}`): ◀ / ▶ redraw median "
              f"{s['redraw_median_ms']:.0f} ms (max {s['redraw_max_ms']:.0f}), play {s['play_steps_per_s']:.1f} "
              f"steps/s, {s['overflowing_elements']} overflowing text elements."]
    return "\n".join(lines)


def main(argv=None) -> None:
    bench_main(__doc__, "results/bench_page.json", measure, table, argv)


if __name__ == "__main__":
    main()
