"""Dark mode in a real Chromium: with the system in dark mode (gradio follows it) and with ``?__theme=dark``, every
text and control the app draws itself (its HTML, the scrubber, the tour's card, the Plotly figures) keeps WCAG AA
contrast, measured from computed colours (``tools.page.contrast``), and axe-core finds nothing on the way, the
lower panels included (``tools.page.axe``); the tour's stops in dark mode are test_browser_ux's walk through the
tour; the light theme keeps its colours. On the same
page loads: each figure starts below its block's label and the plot toolbar, and gradio's ?view=api link passes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.page import bench_ux as ux
from tools.page import contrast

try:       # axe-core through axe-playwright-python (requirements-test.txt); the computed-colour check runs without
    import axe_playwright_python  # noqa: F401
    from tools.page import axe
except ImportError:
    axe = None

pytestmark = pytest.mark.browser
sync_api = pytest.importorskip("playwright.sync_api")
if not Path(ux.CHROMIUM).exists():
    pytest.skip("Debian chromium not installed", allow_module_level=True)


# each visible figure: its block's label and the plot toolbar lie above the figure, clear of its title and legend
CHROME = """() => [...document.querySelectorAll('#output-col .js-plotly-plot')].filter((p) => p.offsetParent)
  .map((p) => { const svg = p.querySelector('.main-svg').getBoundingClientRect();
    const label = p.parentElement.querySelector(':scope > label'), bar = p.querySelector('.modebar');
    const low = (e) => (e ? e.getBoundingClientRect().bottom : -Infinity);
    return {id: p.parentElement.id, svg_top: svg.top, label: low(label), bar: low(bar)}; })"""


@pytest.mark.parametrize("scheme, query", [("dark", ""), ("light", "?__theme=dark")])
def test_dark_mode_keeps_aa_contrast_in_the_text_scrubber_figures_and_panels(pages, server, scheme, query):
    """The opening run, then (the system dark) each lower panel open in turn; the tour's stops are checked in dark
    mode by test_browser_ux's walk through the tour (one walk for both)."""
    pg = pages(1500, 1000, color_scheme=scheme)
    ux.opened(pg, server, query)
    assert contrast.dark_problems(pg) == [], "opening run"
    found = axe.violations(pg, f"{scheme}: opening run") if axe else []
    chrome = pg.evaluate(CHROME)
    clear = [-1e9 < c["bar"] <= c["svg_top"] + 1 and c["label"] <= c["svg_top"] + 1 for c in chrome]
    assert chrome and all(clear), chrome
    if scheme == "dark":
        found += axe.panels(pg, "dark, the lower panels") if axe else []
    assert found == [], "\n".join(found)       # axe-core's WCAG 2.1 AA rules (tools.page.axe)


TOASTS = "() => [...document.querySelectorAll('[data-testid=toast-body]')].map((e) => e.innerText)"


def test_the_light_theme_keeps_its_colours_and_gradios_api_link_passes(pages, server):
    """The dark rules apply only under gradio's .dark: the light page draws what it drew before them. The page is
    opened as gradio's own "Use via API" link opens it (?view=api): no word about an unknown parameter."""
    pg = pages(1500, 1000, color_scheme="light")
    ux.opened(pg, server, "?view=api")
    contrast.settled(pg)
    assert not any("Ignored" in t for t in pg.evaluate(TOASTS)), pg.evaluate(TOASTS)
    got = pg.evaluate("""() => { const cs = (s, p) => getComputedStyle(document.querySelector(s))[p];
      return {dark: document.body.classList.contains('dark'), button: cs('#prev', 'backgroundColor'),
              step: cs('#text .um-step', 'color'), panel: cs('.js-plotly-plot .main-svg', 'backgroundColor'),
              legend: cs('#legend .um-legend', 'color'), mask: cs('#legend .um-mask', 'backgroundColor')}; }""")
    assert got == {"dark": False, "button": "rgb(247, 247, 247)", "step": "rgb(102, 102, 102)",
                   "panel": "rgb(255, 255, 255)", "legend": "rgb(85, 85, 85)",
                   "mask": "rgba(0, 0, 0, 0)"}, got
