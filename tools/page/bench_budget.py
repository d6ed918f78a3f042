"""Budgets that hold: every path that runs the model, against the real app at a short ``UNMASK_MAX_SECONDS``.

    python -m tools.page.bench_budget                      # budget 3 s, 3 requests per path (~3 minutes)
    python -m tools.page.bench_budget --budget 3 --repeat 5 --json out.json

Starts ``python app.py`` on a loopback port and, one request at a time, sends work that needs far more than the
budget (LLaDA, 256 slots, a forward per slot: ~2 s of forwards alone on two cores, plus drawing) down each path:
a link that runs a setting, a page Run, Compare, a Sweep, a link with ``?branch=`` (its base run and the branch share one budget), the GIF of
a long run, and the ``decode`` API (a decode, and a decode with its branch). A request's time runs from the browser's first queue call after the action
(the click, or the link's page load) to the page showing its final state (``data-final`` / ``data-finished``, the
branch's summary, the GIF file), and for the API from submission to its last message. Prints, per path, the
worst and median time against the budget and how many ended later than budget + 0.5 s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from urllib.parse import quote

from tools.bench.app import served
from tools.bench.browser import chromium
from tools import provenance

SPEC = dict(decoder="llada", gen_length=256, block_size=32, steps=0, stop_at_eos=0)
PROMPT = "Tell a story about a yak named Finn."
SLACK_S = 0.5
LINK = "?" + "&".join(f"{k}={v}" for k, v in SPEC.items()) + "&prompt=" + quote(PROMPT)
CLI_SPEC = "llada:gen_length=256,block_size=32,stop_at_eos=0"
BRANCH = json.dumps({"step": 1, "force": None, "spec": None})      # decode on from the base run's first forward
RUN_DONE = "(b) => { const t = document.querySelector('#text .um-text'); return t && t.dataset.run !== b && " \
           "t.dataset.finished === '1'; }"
RUN_ID = "() => { const t = document.querySelector('#text .um-text'); return t ? t.dataset.run : null; }"


class Joins:
    """When the page sent each of its queue calls (gradio's ``/queue/join``)."""

    def __init__(self, pg):
        self.times: list[float] = []
        pg.on("request", lambda r: self.times.append(time.perf_counter()) if "/queue/join" in r.url else None)

    def first_after(self, t: float) -> float:
        return next((x for x in self.times if x >= t), t)


def timed(pg, joins: Joins, act, done: str, arg=None, timeout_s: float = 120) -> float:
    """Seconds from the first queue call after ``act()`` to ``done`` (a JS predicate) holding."""
    t0 = time.perf_counter()
    act()
    pg.wait_for_function(done, arg=arg, timeout=timeout_s * 1000, polling=20)
    return time.perf_counter() - joins.first_after(t0)


def page_paths(browser, url: str) -> dict[str, float]:
    """One request down each page path, in a fresh session; seconds per path."""
    pg = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    joins, out = Joins(pg), {}
    try:
        out["link"] = timed(pg, joins, lambda: pg.goto(url + LINK), RUN_DONE, "example")
        out["link with ?branch="] = timed(pg, joins, lambda: pg.goto(url + LINK + "&branch=" + quote(BRANCH)),
            "() => /Branched after step/.test((document.querySelector('#branch-out') || {}).innerText || '')")
        before = pg.evaluate(RUN_ID)
        out["page Run"] = timed(pg, joins, lambda: pg.click("#run"), RUN_DONE, before)
        out["GIF"] = timed(pg, joins, lambda: pg.click("#gif"),
                           "() => /\\.gif/.test((document.querySelector('#gif-file') || {}).innerText || '')")
        pg.get_by_role("tab", name="Compare").click()
        pg.fill("#spec-a textarea", CLI_SPEC)
        pg.fill("#spec-b textarea", CLI_SPEC + ",remasking=random")
        out["Compare"] = timed(pg, joins, lambda: pg.click("#compare"),
                               "() => !!document.querySelector(\"#compare-out .um-compare[data-final='1']\")")
        pg.get_by_role("tab", name="Sweep").click()
        pg.fill("#sweep-n input[type=number]", "200")
        pg.press("#sweep-n input[type=number]", "Enter")
        out["Sweep"] = timed(pg, joins, lambda: pg.click("#sweep"),
                             "() => !!document.querySelector(\"#sweep-table .um-sweep[data-final='1']\")")
    finally:
        pg.context.close()
    return out


def api_path(url: str, branch: str = "") -> float:
    """The documented API: a decode, or (``branch``) a decode and its branch in one request."""
    from gradio_client import Client
    client = Client(url, verbose=False)
    t0 = time.perf_counter()
    for _ in client.submit(PROMPT, CLI_SPEC, "", branch, api_name="/decode"):
        pass
    return time.perf_counter() - t0


def measure(budget: float, repeat: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {}
    with served(UNMASK_MAX_SECONDS=str(budget), UNMASK_THREADS="2") as app, chromium() as browser:
        page_paths(browser, app.url)                                           # warm-up
        for _ in range(repeat):
            for path, s in page_paths(browser, app.url).items():
                times.setdefault(path, []).append(s)
            times.setdefault("decode API", []).append(api_path(app.url))
            times.setdefault("decode API with a branch", []).append(api_path(app.url, BRANCH))
    return times


def table(times: dict[str, list[float]], budget: float) -> str:
    lines = [f"| path (budget {budget:g} s) | requests | median (s) | worst (s) | worst − budget (s) | "
             f"later than budget + {SLACK_S} s |", "|---|---|---|---|---|---|"]
    for path, xs in times.items():
        late = sum(x > budget + SLACK_S for x in xs)
        lines.append(f"| {path} | {len(xs)} | {statistics.median(xs):.2f} | {max(xs):.2f} | "
                     f"{max(xs) - budget:+.2f} | {late} of {len(xs)} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=3.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    times = measure(a.budget, a.repeat)
    print(table(times, a.budget))
    if a.json:
        provenance.write(a.json, dict(budget=a.budget, times=times), argv)


if __name__ == "__main__":
    main()
