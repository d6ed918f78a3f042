"""The "views this run leaves out" links, in a real Chromium: clicked from a page scrolled down and in the dark
theme, a link lands with its tab selected, the tab strip's top in the viewport, and ``?__theme=dark`` kept in the
address (the page dark) and in the run's link box; at a desktop's 1500 px and a phone's 390 px."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.page import bench_ux as ux

pytestmark = pytest.mark.browser
sync_api = pytest.importorskip("playwright.sync_api")
if not Path(ux.CHROMIUM).exists():
    pytest.skip("Debian chromium not installed", allow_module_level=True)
LANDED = """(tab) => { const s = window.__umScrub, b = document.querySelector('#view-tabs [role=tab][aria-selected=true]');
  return s && s.run && s.run.run !== 'example' && b && b.innerText.trim() === tab; }"""
WHERE = """() => { const t = document.getElementById('view-tabs').getBoundingClientRect();
  return {top: t.top, height: innerHeight, theme: new URLSearchParams(location.search).get('__theme'),
          dark: document.body.classList.contains('dark'), link: document.getElementById('link').value}; }"""


@pytest.mark.parametrize("width, height, scrolled", [(1500, 1000, 791), (390, 844, 1774)])
def test_a_views_link_lands_with_its_tab_in_sight_and_keeps_the_theme(pages, server, width, height, scrolled):
    pg = pages(width, height)
    pg.goto(server + "?__theme=dark")
    pg.wait_for_selector("#text .um-text[data-run='example']", timeout=60_000)
    pg.wait_for_selector("#um-more-views li[data-tab='KLASS'] a", state="attached", timeout=30_000)
    pg.evaluate(f"() => window.scrollTo(0, {scrolled})")
    with pg.expect_navigation(timeout=30_000):
        pg.eval_on_selector("#um-more-views li[data-tab='KLASS'] a", "a => a.click()")
    pg.wait_for_function(LANDED, arg="KLASS", timeout=180_000)
    pg.wait_for_timeout(800)                          # what the tab's figures draw after it opens
    got = pg.evaluate(WHERE)
    assert got["theme"] == "dark" and got["dark"], got
    assert "__theme=dark" in got["link"], got
    assert 0 <= got["top"] < got["height"] - 40, got  # the tab strip's top, and room under it, in sight
