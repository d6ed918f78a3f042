"""The page, round six, in a real Chromium (issue 76, item 7's page points):

- a switch of model keeps WCAG AA while gradio marks the model's card and the decoder's description as being
  updated (it faded them to 20 % opacity: 1.48:1 and 1.76:1) and after, in both themes: the two blocks' text
  measured from computed colours at the fade's end state, axe-core over the settings column during the update and
  over the page once it settles (``tools.page.axe``); neither block is a scrollable region no keyboard reaches;
- a 1280 × 720 screen at 150 % zoom (853 × 480 CSS px) shows the prompt, Run and the top of the text view on its
  first screen, not only the run bar and the speed tiles;
- the play-speed menu's chevron stands out from the menu (3:1) in both themes (dark mode drew it at 2.9:1)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tools.page import bench_ux as ux
from tools.page import contrast

pytestmark = pytest.mark.browser
sync_api = pytest.importorskip("playwright.sync_api")
pytest.importorskip("axe_playwright_python")
if not Path(ux.CHROMIUM).exists():
    pytest.skip("Debian chromium not installed", allow_module_level=True)
from tools.page import axe  # noqa: E402  (needs axe_playwright_python)

BLOCKS = ("#model-card", "#decoder-info")
PENDING = ", ".join(f"{b} .pending" for b in BLOCKS)
# while either block is marked pending (fades shown at their end state: contrast.without_fades), the two blocks'
# text measured (tools.page.contrast) and each block's scrolling; null until gradio marks one
DURING = """([measure, blocks, pending]) => { if (!document.querySelector(pending)) return null;
  const m = eval(measure)(blocks.map((b) => b + ' [data-testid=markdown]'));
  const scrolls = blocks.map((b) => { const e = document.querySelector(b), cs = getComputedStyle(e);
    return {block: b, scrollable: /auto|scroll/.test(cs.overflowY + cs.overflowX) &&
      (e.scrollHeight > e.clientHeight || e.scrollWidth > e.clientWidth), focusable: e.tabIndex >= 0}; });
  return {texts: m.texts, scrolls}; }"""
SETTLED = "([pending, words]) => !document.querySelector(pending) && " \
          "document.querySelector('#decoder-info').innerText.includes(words)"


def switch_model(pg, name: str) -> None:
    pg.click("#model input")
    pg.get_by_role("option", name=re.compile("^" + re.escape(name))).click()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_a_model_switch_keeps_aa_while_gradio_marks_the_card_pending_and_after(browser, server, scheme):
    pg = browser.new_page(viewport={"width": 1500, "height": 1000}, color_scheme=scheme)
    try:
        ux.opened(pg, server)
        contrast.settled(pg)
        contrast.without_fades(pg)      # axe during the update reads each fade's end, not a frame of it
        switch_model(pg, "unmask-uniform-small")
        during = pg.wait_for_function(DURING, arg=[contrast.MEASURE, list(BLOCKS), PENDING], polling="raf",
                                      timeout=60_000).json_value()
        found = axe.violations(pg, f"{scheme}, during the update", "#params-col")
        assert during["texts"], "nothing measured in the two blocks"          # not vacuous
        assert [t for t in during["texts"] if t["ratio"] < t["need"]] == [], during["texts"]
        assert not [s for s in during["scrolls"] if s["scrollable"] and not s["focusable"]], during["scrolls"]
        from engine.catalogue import catalogue
        words = catalogue.DECODERS["uniform"].summary.split("**")[1]          # the model's only decoder
        pg.wait_for_function(SETTLED, arg=[PENDING, words], timeout=60_000)
        contrast.settled(pg)
        found += axe.violations(pg, f"{scheme}, settled")
        assert found == [], "\n".join(found)
    finally:
        pg.close()


FIRST_SCREEN = """() => { const box = (s) => document.querySelector(s).getBoundingClientRect();
  return {height: innerHeight, prompt: box('#prompt').bottom, run: box('#run').bottom,
          text: box('#text').top, step: box('#text .um-step').bottom}; }"""
# the play-speed menu's chevron (gradio draws it as an SVG background image): its stroke against the menu's fill
CHEVRON = """() => { const s = document.querySelector('.um-scrub select'), cs = getComputedStyle(s);
  const m = /stroke='%23([0-9a-f]{6})'/i.exec(cs.backgroundImage); if (!m) return null;
  const hex = m[1], fg = [0, 2, 4].map((i) => parseInt(hex.slice(i, i + 2), 16));
  const bg = /rgba?\\(([^)]+)\\)/.exec(cs.backgroundColor)[1].split(',').map(Number);
  const lin = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
  const lum = (c) => 0.2126 * lin(c[0]) + 0.7152 * lin(c[1]) + 0.0722 * lin(c[2]);
  const [x, y] = [lum(fg), lum(bg)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); }"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_a_short_screen_shows_run_and_the_text_views_top_and_the_speed_menu_its_chevron(browser, server, scheme):
    # a 1280 × 720 laptop at 150 % zoom: 853 × 480 CSS px at 1.5 device pixels each
    pg = browser.new_page(viewport={"width": 853, "height": 480}, device_scale_factor=1.5, color_scheme=scheme)
    try:
        ux.opened(pg, server)
        contrast.settled(pg)
        first = ux.first_view(pg)
        got = pg.evaluate(FIRST_SCREEN)
        assert first["#prompt"] and first["#run"], (first, got)
        assert got["text"] < got["height"] and got["step"] <= got["height"], got   # the text view's heading
        chevron = pg.evaluate(CHEVRON)
        assert chevron is not None and chevron >= 3, chevron
    finally:
        pg.close()
