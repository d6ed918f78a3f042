"""Accessibility checked by the field's engine: axe-core's WCAG 2.1 A and AA rules (``tools.page.axe``) find
nothing on the page in the light theme at a projector's and a phone's size (on the phone with each lower panel
opened: Compare, Branch, Sweep, Masks, the glossary), and in the dark theme on a phone. The dark theme at 1500 px,
with every tour stop (its card, the decoders' tabs it opens, Branch's marked words), is checked on the dark test's own
walk through the tour (``tests/test_browser_dark.py``), which also keeps the computed-colour check for what axe
cannot see (the figures' SVG text, their colour scales, the masked cells)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.page import axe
from tools.page import bench_ux as ux
from tools.page import contrast

pytestmark = pytest.mark.browser
sync_api = pytest.importorskip("playwright.sync_api")
pytest.importorskip("axe_playwright_python")
if not Path(ux.CHROMIUM).exists():
    pytest.skip("Debian chromium not installed", allow_module_level=True)


def test_axe_finds_nothing_in_either_theme_at_either_size_with_each_panel_open(browser, server):
    found = []
    # the lower panels at 1500 px are the dark test's, at its tour's end: here the phone's (each scan costs seconds)
    for scheme, size, open_panels in (("light", (390, 844), True), ("light", (1500, 1000), False),
                                      ("dark", (390, 844), False)):
        pg = browser.new_page(viewport=dict(zip(("width", "height"), size)), color_scheme=scheme)
        try:
            ux.opened(pg, server)
            contrast.settled(pg)
            where = f"{scheme} {size[0]}x{size[1]}"
            found += axe.violations(pg, where) + (axe.panels(pg, where) if open_panels else [])
        finally:
            pg.close()
    assert found == [], "\n".join(found)


def test_axe_reports_what_it_finds_on_a_page_with_known_faults(browser):
    """Not vacuous: a page with an image without a text alternative, a nameless button and grey-on-white text
    gets each of those rules back, with its nodes (only the violations come back whole, ``tools.page.axe``)."""
    pg = browser.new_page()
    try:
        pg.set_content('<html lang="en"><head><title>t</title></head><body><main><img src="data:,">'
                       '<button></button><p style="color:#bbb;background:#fff">faint</p></main></body></html>')
        found = axe.violations(pg, "faults")
        assert {f.split()[1] for f in found} >= {"image-alt", "button-name", "color-contrast"}, found
        again = axe.violations(pg, "faults")               # axe-core injected once: the same answer
        assert again == found, again
    finally:
        pg.close()
