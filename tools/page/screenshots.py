"""The README's screenshots, regenerated: the real app on a loopback port, a KLASS decode of the opening story
opened by its link, drawn by Chromium in the light and the dark theme at a desktop's 1500 × 1000 (docs/page.png,
docs/page-dark.png) and a phone's 390 × 844 (artifacts/, to look at); and the guided tour's second stop (a draft,
its card carrying the text) on a lecture projector's 1280 × 720 (docs/tour.png; the dark one in artifacts/).

    python -m tools.page.screenshots [--out docs] [--phones artifacts]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = "?decoder=klass&prompt=Tell+a+story+about+a+yak+named+Finn.&step=9"
SIZES = {"desktop": (1500, 1000), "phone": (390, 844)}
TOUR_SIZE, TOUR_STOP = (1280, 720), 1          # 0-based: the "Draft" stop, whose card carries the text


def shoot(url: str, out: Path, phones: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright

    from tools.page.bench_ux import launch
    from tools.page.contrast import settled
    made = []
    with sync_playwright() as p:
        browser = launch(p)
        for scheme in ("light", "dark"):
            for size, (w, h) in SIZES.items():
                pg = browser.new_page(viewport={"width": w, "height": h}, color_scheme=scheme)
                pg.goto(url + LINK)
                pg.wait_for_selector("#text .um-text[data-finished='1']", timeout=300_000)
                pg.wait_for_function("() => window.__umScrub && window.__umScrub.run", timeout=60_000)
                settled(pg)
                pg.click("#tab-klass") if size == "desktop" and pg.query_selector("#tab-klass") else None
                pg.wait_for_timeout(1500)
                # the run bar, the summary, the text and the slider: the first screen a visitor meets
                pg.evaluate("() => document.querySelector('#title').scrollIntoView()")
                name = ("page" if scheme == "light" else "page-dark") if size == "desktop" else f"page-{scheme}-phone"
                path = (out if size == "desktop" else phones) / f"{name}.png"
                path.parent.mkdir(parents=True, exist_ok=True)
                pg.screenshot(path=str(path))
                made.append(path)
                pg.close()
            tour = out / "tour.png" if scheme == "light" else phones / "tour-dark.png"
            made.append(shoot_tour(browser, url, tour, scheme))
        browser.close()
    return made


def shoot_tour(browser, url: str, path: Path, scheme: str) -> Path:
    """The tour at its TOUR_STOP: the view it points at, outlined, and its card pinned beside it."""
    from tools.page.bench_ux import at_stop, opened
    from tools.page.contrast import settled
    w, h = TOUR_SIZE
    pg = browser.new_page(viewport={"width": w, "height": h}, color_scheme=scheme)
    opened(pg, url)
    settled(pg)
    pg.click("#tour-start")
    for i in range(1, TOUR_STOP + 1):
        at_stop(pg, i - 1)
        pg.click("#tour-next")
    at_stop(pg, TOUR_STOP)
    pg.wait_for_timeout(1500)                   # the stop's scroll into sight and its figures' redraw
    path.parent.mkdir(parents=True, exist_ok=True)
    pg.screenshot(path=str(path))
    pg.close()
    return path


def main(argv=None) -> None:
    from tools.local_app import running_app
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "docs"))
    ap.add_argument("--phones", default=str(ROOT / "artifacts"))
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d, running_app(Path(d)) as (url, _):
        for path in shoot(url, Path(a.out), Path(a.phones)):
            print(path)


if __name__ == "__main__":
    main()
