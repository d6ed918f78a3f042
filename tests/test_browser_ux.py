"""What a newcomer meets, in a real Chromium (the measurements of ``tools.page.bench_ux``): the run in the first
viewport, only the controls the decoder reads, a tour whose text and view are on screen together, and a shared
link that keeps the selected position."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.page import bench_ux as ux
from tools.page import contrast

try:       # axe-core through axe-playwright-python (requirements-test.txt)
    import axe_playwright_python  # noqa: F401
    from tools.page import axe
except ImportError:
    axe = None

pytestmark = pytest.mark.browser
sync_api = pytest.importorskip("playwright.sync_api")
if not Path(ux.CHROMIUM).exists():
    pytest.skip("Debian chromium not installed", allow_module_level=True)
ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"


@pytest.fixture
def page(browser, request):
    pg = browser.new_page(viewport={"width": 1500, "height": 1100})
    yield pg
    ARTIFACTS.mkdir(exist_ok=True)
    rep = getattr(request.node, "rep_call", None)
    if rep is None or rep.failed:    # the page as it failed, for diagnosis (a passing page's costs ~1 s)
        pg.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"))
    pg.close()


def test_the_run_is_in_the_first_viewport_and_only_read_controls_show(page, server):
    ux.opened(page, server)
    assert all(ux.first_view(page).values()), ux.first_view(page)
    shown = ux.controls(page)
    assert len(shown) <= 15, shown
    from engine.catalogue import catalogue
    params = {k for k in shown if k in catalogue.PARAMS}
    assert params <= set(catalogue.params_of("threshold")), params
    ux.choose_decoder(page, "s2d2")
    assert {k for k in ux.controls(page) if k in catalogue.PARAMS} <= set(catalogue.params_of("s2d2"))
    ux.choose_model(page, "unmask-uniform-small", "uniform")
    assert not {"block_size", "tau", "steps"} & set(ux.controls(page))


def agrees(shown: dict, stop) -> None:
    """Everything the page says of the run shown describes the stop's own run: the decoder and model boxes, the
    link, every "step s / n" label (the slider's and the text view's), the tabs, the scrubber's run."""
    from explorer.page.examples import load_examples
    from engine.catalogue import catalogue
    from explorer.registry import tabs_shown
    tr = load_examples()[stop.example]
    n, s = len(tr.records), stop.step(tr)
    assert shown["n"] == n and shown["step"] == s, (stop.title, shown)
    assert shown["labels"] and set(shown["labels"]) == {f"step {s} / {n}"}, (stop.title, shown["labels"])
    assert shown["decoder"] == catalogue.menu_label(tr.meta.decoder), (stop.title, shown["decoder"])
    assert shown["model"].startswith(tr.meta.model), (stop.title, shown["model"])
    assert f"decoder={tr.meta.decoder}" in shown["link"] and f"step={s}" in shown["link"], (stop.title, shown["link"])
    assert shown["tabs"] == tabs_shown(tr), (stop.title, shown["tabs"])


def test_every_tour_stop_shows_its_own_run_everywhere_with_its_view_and_text_together(pages, server):
    """At a lecture projector's 1280 × 720, in dark mode: each stop's tab, view and card on screen together, and the
    eight things that describe the run shown agree with the stop's run, walking forward and back across runs. At
    each stop the dark theme holds (test_browser_dark's checks: AA contrast of the card and the views the stops
    open, S2D2's, the canvas, edits; axe-core finds nothing)."""
    from explorer.page.tour import STOPS
    page = pages(1280, 720, color_scheme="dark")
    ux.opened(page, server)
    found = []

    def dark(i):
        assert contrast.dark_problems(page, figures=False) == [], f"tour stop {i + 1}"
        found.extend(axe.violations(page, f"tour stop {i + 1}", "#output-col") if axe else [])
    rows = ux.tour(page, each=dark)
    assert found == [], "\n".join(found)       # axe-core's WCAG 2.1 AA rules (tools.page.axe)
    for r, stop in zip(rows, STOPS):
        assert r["tab"] == r["wanted_tab"] and r["view_in_sight"] and r["card_in_sight"] and not r["overlap"], r
        assert r["errors"] == [], r                                # no error toast on the way
        assert r["text_in_card"] == stop.text, r                   # words about the text come with it
        agrees(r["shown"], stop)
    for name in {r["example"] for r in rows}:
        steps = [r["step"] for r in rows if r["example"] == name]
        assert steps == sorted(set(steps)), (name, steps)        # forward within one run
    for i in range(len(STOPS) - 2, 4, -1):                       # back across every change of run
        page.click("#tour-back")
        ux.at_stop(page, i)
        agrees(ux.shown_run(page), STOPS[i])
    page.click("#tour-close")
    page.click("#prev")                                          # the scrubber moves the run shown
    page.wait_for_timeout(500)
    agrees(ux.shown_run(page), type(STOPS[5])(**{**STOPS[5].__dict__, "step": lambda tr: STOPS[5].step(tr) - 1}))


def test_a_tab_with_nothing_for_the_run_is_hidden(page, server):
    ux.opened(page, server, "?decoder=threshold&block_size=4&gen_length=16")
    page.wait_for_function("() => window.__umScrub.run && window.__umScrub.run.run !== 'example'", timeout=120_000)
    shown = page.evaluate("() => [...document.querySelectorAll('#view-tabs [role=tab]')]"
                          ".filter(b => b.style.display !== 'none').map(b => b.innerText.trim())")
    assert shown == ["Decode"]


def test_a_phone_sees_run_first_and_the_text_after_pressing_it(browser, server):
    pg = browser.new_page(viewport={"width": 390, "height": 844})
    try:
        res = ux.phone_run(pg, server)
        assert res["run_in_sight"] and res["text_in_sight"], res
    finally:
        pg.close()


def test_a_link_keeps_the_selected_position(page, server):
    ux.opened(page, server, "?decoder=llada&block_size=4&steps=2&gen_length=16")
    page.wait_for_function("() => window.__umScrub.run && window.__umScrub.run.run !== 'example'", timeout=120_000)
    pos = page.evaluate("() => window.__umScrub.run.pos[2]")
    page.evaluate("(p) => window.__umScrub.select(p)", pos)
    link = page.input_value("#link")
    assert f"pos={pos}" in link
    page.goto(link)
    page.wait_for_function("(p) => document.querySelector('#text .um-sel') && "
                           "document.querySelector('#text .um-sel').dataset.pos == p", arg=pos, timeout=120_000)
    assert "position" in page.inner_text("#candidates")


def test_dragging_tau_previews_the_cells_that_would_clear_it_without_a_request(page, server):
    ux.opened(page, server)
    res = ux.tune_by_eye(page)
    assert res["marks"] > 0 and "more token" in res["note"] and "diverges" in res["note"], res
    from engine.records.trace import Trace
    from explorer.scrub import payload, would_pass_tau
    # the browser's marks are the server's rule (scrub.js's tune against explorer.scrub's copy; the drag ends at 0.1)
    opener = Trace.load(Path(__file__).resolve().parent.parent / "assets" / "examples" / "threshold.npz")
    assert res["marks"] == len(would_pass_tau(payload(opener), 0.1)), res
    # the browser alone redraws (no request); how fast is python -m tools.page.bench_ux's figure, not a test's
    assert res["requests"] == 0, res
    assert res["preview_in_sight"], res      # at 1500 × 1100 the map is far below: its pinned copy carries it


# the pinned copy's box, the dragged dial's and those of the settings' visible controls, while the dial is held
PEEK_COVERS = """() => { const box = (e) => { const b = e.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
  const p = document.getElementById('um-tune-peek');
  return [p && getComputedStyle(p).display !== 'none' ? box(p) : null, box(document.getElementById('tau')),
    [...document.querySelectorAll('#params-col :is(input, button, select, textarea)')]
      .filter((e) => e.getClientRects().length).map(box),
    ['tune-note', 'prev', 'next'].map((id) => document.getElementById(id)).filter((e) => { const b = e.getBoundingClientRect();
      return b.height && b.bottom > 0 && b.top < innerHeight; }).map(box)]; }"""


def test_the_preview_of_a_dragged_dial_is_in_sight_on_a_projector_and_a_phone(browser, server):
    """In sight, and clear of the dial being dragged, of its note and of the scrubber's ◀ ▶ buttons where they are
    on screen; beside the settings column (a projector) clear of every setting too. On a phone the settings fill the width, so only the dial's row must stay clear."""
    meets = lambda a, b: not (a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1])  # noqa: E731
    for size in ((1280, 720), (1500, 1000), (390, 844)):
        pg = browser.new_page(viewport=dict(zip(("width", "height"), size)))
        try:
            ux.opened(pg, server)
            pg.locator("#tau input[type=range]").scroll_into_view_if_needed()
            res = ux.tune_by_eye(pg)
            assert res["marks"] > 0 and res["preview_in_sight"], (size, res)
            peek, dial, settings, own = pg.evaluate(PEEK_COVERS)
            assert peek, (size, "the map is out of sight here: its pinned copy carries the preview")
            assert not meets(peek, dial), (size, peek, dial)
            assert not [c for c in own if meets(peek, c)], (size, peek, own)    # nor its note, nor ◀ ▶
            if size[0] > 500:
                assert not [c for c in settings if meets(peek, c)], (size, peek)
        except AssertionError:           # the page as it failed, for diagnosis (a passing page's costs ~1 s)
            ARTIFACTS.mkdir(exist_ok=True)
            pg.screenshot(path=str(ARTIFACTS / f"tau_peek_{size[0]}x{size[1]}.png"))
            raise
        finally:
            pg.close()


def test_dragging_ebs_gamma_previews_the_cells_that_would_fit_under_the_bound(page, server):
    ux.opened(page, server, "?decoder=eb&block_size=8&gen_length=32&entropy_bound=0.1&temperature=1")
    page.wait_for_function("() => window.__umScrub.run && window.__umScrub.run.run !== 'example'", timeout=120_000)
    assert page.evaluate("() => window.__umScrub.run.tune") == "entropy_bound"
    res = ux.tune_by_eye(page, dial="entropy_bound", v0=0.1, dv=0.3, sym="γ")
    assert res["marks"] > 0 and "fit under the bound" in res["note"] and "at γ 3.10" in res["note"], res
    # the browser alone redraws (no request); how fast is python -m tools.page.bench_ux's figure, not a test's
    assert res["requests"] == 0, res


def test_colour_bars_keep_their_gradient_after_scrubbing(page, server):
    """Plotly fills a colour bar with url(<page address>#id); the scrubber moves the address bar, which would leave
    the bar empty. After 10 scrubs and a slider drag every gradient reference is local and resolves."""
    # a <base> element (as a hosting frame may add) makes Plotly write full addresses into its gradient fills
    page.add_init_script("document.addEventListener('DOMContentLoaded', () => { const b = "
                         "document.createElement('base'); b.href = location.href; document.head.prepend(b); })")
    ux.opened(page, server, "?decoder=llada&block_size=4&steps=2&gen_length=16")
    page.wait_for_function("() => window.__umScrub.run && window.__umScrub.run.run !== 'example'", timeout=120_000)
    page.wait_for_selector("#conf-plot .js-plotly-plot", timeout=60_000)
    for i in range(10):
        page.click("#prev" if i % 2 else "#next")
    page.locator("#step").fill("2")
    bad = page.evaluate("""() => [...document.querySelectorAll('.js-plotly-plot [fill*="url("], .js-plotly-plot [style*="url("]')]
      .map(e => e.getAttribute('fill') || e.style.fill).filter(v => v && v.includes('url(')).filter(v => {
        const m = /url\\(["']?([^"')]*)["']?\\)/.exec(v); const ref = m ? m[1] : '';
        return !ref.startsWith('#') || !document.getElementById(ref.slice(1)); })""")
    assert bad == [], bad
    assert page.evaluate("() => [...document.querySelectorAll('#conf-plot .cbfill')].some(e => "
                         "e.style.fill.includes('url('))")


def test_on_a_phone_a_decoders_own_tab_is_on_screen_and_opens(browser, server):
    pg = browser.new_page(viewport={"width": 390, "height": 844})
    try:
        ux.opened(pg, server, "?decoder=klass&block_size=8")
        pg.wait_for_function("() => window.__umScrub.run && window.__umScrub.run.run !== 'example'", timeout=120_000)
        tab = pg.locator("#view-tabs [role=tab][data-tab-id=KLASS]")
        tab.wait_for(state="visible", timeout=30_000)
        box = tab.bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= 390, box
        tab.click()
        pg.wait_for_selector("#klass-plot .js-plotly-plot", timeout=60_000)
    finally:
        pg.close()


def test_phone_heatmap_position_labels_do_not_overlap(browser, server):
    pg = browser.new_page(viewport={"width": 390, "height": 844})
    try:
        ux.opened(pg, server)
        pg.wait_for_function("() => { const g = document.querySelector('#mask-plot .js-plotly-plot'); "
                             "return g && g.layout.xaxis.nticks === 6; }", timeout=30_000)
        pg.wait_for_timeout(300)
        boxes = pg.evaluate("() => [...document.querySelectorAll('#mask-plot .xtick text')].map(t => { "
                            "const r = t.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; })")
        assert boxes
        overlaps = [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:]
                    if not (a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1])]
        assert overlaps == [], overlaps
    finally:
        pg.close()


def test_on_a_phone_the_tours_first_stop_shows_its_view_and_the_text_it_speaks_of(browser, server):
    pg = browser.new_page(viewport={"width": 390, "height": 844})
    try:
        ux.opened(pg, server)
        pg.click("#tour-start")
        ux.at_stop(pg, 0)
        seen = "(s) => { const e = document.querySelector(s); if (!e) return false; const r = e.getBoundingClientRect(); " \
               "return r.bottom > 0 && r.top < innerHeight && r.height > 0; }"
        assert pg.evaluate(seen, "#tour-card .um-tour-text .um-text") and pg.evaluate(seen, "#mask-plot")
    finally:
        pg.close()


def test_branch_here_brings_its_panel_into_sight_on_a_projector_and_a_phone(browser, server):
    for size in ((1280, 720), (390, 844)):
        pg = browser.new_page(viewport=dict(zip(("width", "height"), size)))
        try:
            ux.opened(pg, server)
            pg.locator("#step").fill("5")
            pg.locator("#text .um-mask").first.click()
            pg.wait_for_function("() => document.querySelector('#position').value !== ''", timeout=15000)
            pg.click("#branch-here")
            pg.wait_for_selector("#branch-where >> text=after step 5", timeout=15000)
            pg.wait_for_function("() => { const r = document.querySelector('#branch-where').getBoundingClientRect(); "
                                 "return r.top >= -2 && r.top < innerHeight; }", timeout=5000)
        finally:
            pg.close()


# the views line's top, the tab strip's bottom, and each link's tab and address
VIEWS_LINE = """() => { const line = document.getElementById('um-more-views'), strip = document.querySelector('#view-tabs > .tab-wrapper');
  return {line: line && line.getBoundingClientRect().top, strip: strip.getBoundingClientRect().bottom,
    links: [...document.querySelectorAll('#um-more-views a')].map((a) => [a.closest('[data-tab]').dataset.tab,
      a.dataset.decoder, a.getAttribute('href')])}; }"""
# each visible view of the open tab, by its points (0: gradio's empty box, no figure drawn)
FILLED = """(tab) => { const t = document.querySelector('#view-tabs [role=tab][aria-selected=true]');
  const views = [...document.querySelectorAll('#view-tabs [id$="-plot"]')].filter((e) => e.offsetParent);
  const size = (v) => (!v ? 0 : v.bdata ? v.bdata.length : Array.from(v).filter((x) => x !== null).length);
  const points = (p) => (!p ? 0 : (p.data || []).reduce((n, d) => n + Math.max(size(d.x), size(d.z)), 0));
  return {tab: t && t.innerText.trim(), points: views.map((e) => points(e.querySelector('.js-plotly-plot')))}; }"""


def test_the_views_line_is_under_the_tab_strip_and_its_links_open_runs_that_fill_their_tab(page, server):
    """Under the strip, not below the Decode tab's figures. Followed here (each a live decode on the CI box): token
    editing (an edit run that edits: the Revisions tab, its first revised position selected), the canvas
    (arithmetic on the uniform model, its first answer slot selected: a right answer, no [PAD]) and TSPD + CE
    (opened at its fan's step); each tab's every visible figure has points. That every link is its decoder's
    pre-baked setting, which fills the tab, is tests/test_more_views.py's. TSPD's link opens twice: the second run
    comes from the cache, its figures sent at once as the tab opens (gradio left its trajectory figure empty in 3
    opens of 4, until assets/js/scrub.js asked for it again)."""
    ux.opened(page, server)
    got = page.evaluate(VIEWS_LINE)
    assert got["line"] is not None and 0 <= got["line"] - got["strip"] < 40, got
    links = {(tab, dec): href for tab, dec, href in got["links"]}
    for tab, dec in (("Revisions", "edit"), ("Canvas", "uniform"), ("TSPD + CE", "tspd"), ("TSPD + CE", "tspd")):
        page.goto(server + links[tab, dec])
        page.wait_for_function("() => window.__umScrub && window.__umScrub.run && "
                               "window.__umScrub.run.run !== 'example'", timeout=120_000)
        page.wait_for_function("(t) => { const b = document.querySelector('#view-tabs [role=tab][aria-selected=true]');"
                               " return b && b.innerText.trim() === t; }", arg=tab, timeout=30_000)
        try:                   # the server's views draw after the client's: wait for every figure, a loaded box too
            page.wait_for_function(f"() => {{ const f = ({FILLED})(''); return f.points.length > 0 && "
                                   "Math.min(...f.points) > 0; }", timeout=60_000)
        except sync_api.TimeoutError:
            pass               # the assertion below says which figure stayed empty
        filled = page.evaluate(FILLED, tab)
        assert filled["tab"] == tab and filled["points"] and min(filled["points"]) > 0, (tab, filled)
        if axe is not None:          # the decoder's own tab, open: axe-core finds nothing (tools.page.axe)
            assert axe.violations(page, f"{dec}'s {tab} tab", "#output-col") == []
        if tab == "Canvas":
            assert "[PAD]" not in page.inner_text("#text") and "RIGHT" in page.inner_text("#summary").upper()
        if tab == "TSPD + CE":        # the slider at the step the view's title names, no second step named
            # read once drawn: a late update of the server's views redraws the figure (its element is replaced)
            title = page.wait_for_function("() => { const g = document.querySelector('#traj-plot .js-plotly-plot');"
                                           " return g && g.layout && g.layout.title && g.layout.title.text; }",
                                           timeout=30_000).json_value()
            assert "slider" not in title and f"step={page.evaluate('() => window.__umScrub.step')}" in \
                links[tab, dec], title


def test_a_held_out_problem_runs_when_picked(page, server):
    """The old text never stands under the new prompt: picking a problem runs it."""
    ux.opened(page, server)
    before = page.evaluate("() => window.__umScrub.run.run")
    page.click("#examples input")
    page.get_by_role("option").nth(2).click()
    page.wait_for_function("(b) => { const t = document.querySelector('#text .um-text'); return t && "
                           "t.dataset.run !== b && t.dataset.finished === '1'; }", arg=before, timeout=120_000)
    assert page.inner_text("#text .um-prompt").strip() == page.input_value("#prompt textarea").strip()


# on a phone: each visible figure's label, toolbar and plot, as boxes
PHONE_CHROME = """() => [...document.querySelectorAll('#output-col .js-plotly-plot')].filter((p) => p.offsetParent)
  .map((p) => { const b = (e) => { if (!e) return null; const r = e.getBoundingClientRect();
      return [r.left, r.top, r.right, r.bottom]; };
    return [b(p.parentElement.querySelector(':scope > label')), b(p.querySelector('.modebar')),
            b(p.querySelector('.main-svg'))]; })"""


def test_on_a_phone_chips_labels_the_tour_heading_and_a_busy_sign_stay_readable(browser, server):
    """At 390 × 844: each legend chip on the line of its words; a figure's label, its toolbar and its plot apart;
    the tour card's heading in view with its text scrolled to the end; a re-run started from the τ dial (far
    below Run) shows a busy sign in view."""
    meets = lambda a, b: a and b and not (a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1])  # noqa: E731
    pg = browser.new_page(viewport={"width": 390, "height": 844})
    try:
        ux.opened(pg, server)
        heights = pg.evaluate("() => [...document.querySelectorAll('#legend .um-leg')].map((e) => "
                              "e.getBoundingClientRect().height)")
        assert len(heights) == 6 and max(heights) < 34, heights           # one line each
        pg.wait_for_selector("#mask-plot .js-plotly-plot .main-svg", timeout=60_000)
        pg.wait_for_timeout(800)
        figures = pg.evaluate(PHONE_CHROME)
        assert figures and not [f for f in figures if meets(f[0], f[1]) or meets(f[1], f[2])], figures
        pg.click("#tour-start")
        ux.at_stop(pg, 0)
        pg.evaluate("() => { document.getElementById('tour-card').scrollTop = 1e6; }")
        head, card = pg.evaluate("() => [document.querySelector('#tour-card .um-tour > b'), "
                                 "document.getElementById('tour-card')].map((e) => { const r = e.getBoundingClientRect(); "
                                 "return [r.top, r.bottom]; })")
        assert card[0] - 1 <= head[0] and head[1] <= card[1], (head, card)
        pg.click("#tour-close")
        pg.locator("#tau input[type=range]").scroll_into_view_if_needed()
        pg.focus("#tau input[type=range]")
        pg.keyboard.press("ArrowLeft")
        pg.wait_for_function("() => { const s = document.getElementById('um-busy'); return s && "
                             "getComputedStyle(s).display === 'block' && s.getBoundingClientRect().bottom <= innerHeight; }",
                             timeout=30_000)
    finally:
        pg.close()
