"""axe-core's WCAG 2.1 A and AA rules over the page (through axe-playwright-python, which bundles axe-core: no
network), for the browser tests (``tests/test_browser_axe.py``, ``tests/test_browser_dark.py``). The Plotly
figures are left to the project's computed-colour check (``tools.page.contrast``): axe reads little of their SVG,
and its colour check there is most of its time (6.5 s a page with them, 2.9 s without, on a loaded 2-core box).
axe-core is injected once per document, and only the violations come back whole (every node of every passing rule,
0.5 MB a page, took a third of each run's time to serialize: 1.6 s a run on the opening page, 0.8 s now)."""

from __future__ import annotations

RULES = {"runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]}}
NO_PLOTS = {"exclude": [[".js-plotly-plot"]]}
PANELS = ("Compare", "Branch", "Sweep", "Masks", "Glossary")     # the lower tabs (explorer.layout)


def violations(pg, where: str, include: str | None = None) -> list[str]:
    """Each violated rule with its count and first targets, for the page (or the element ``include`` names) as it
    stands; an empty list when axe finds nothing."""
    context = {**NO_PLOTS, **({"include": [[include]]} if include else {})}
    if not pg.evaluate("() => typeof window.axe === 'object'"):
        pg.evaluate(_script())
    res = pg.evaluate(RUN, [context, {**RULES, "resultTypes": ["violations"]}])
    assert res["passes"], (where, "axe ran no rule")
    return [f"{where}: {v['id']} ×{len(v['nodes'])} {[n['target'] for n in v['nodes'][:3]]}"
            for v in res["violations"]]


RUN = ("([context, options]) => axe.run(context, options)"
       ".then((r) => ({passes: r.passes.length, violations: r.violations}))")


def _script() -> str:
    from axe_playwright_python.sync_playwright import Axe
    return Axe().axe_script


def panels(pg, where: str) -> list[str]:
    """Each lower tab opened in turn, and axe over it."""
    found = []
    for name in PANELS:
        pg.locator("#more-tabs [role=tab]", has_text=name).first.click()
        pg.wait_for_timeout(300)
        found += violations(pg, f"{where}, {name}", "#more-tabs")
    return found
