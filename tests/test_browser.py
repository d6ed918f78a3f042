"""Browser tests: a real Chromium (Debian's, via Playwright) against the app on a free local port.

A failed test's page is screenshot under artifacts/ (conftest ``pages``). Skipped where Chromium or Playwright is
missing; CI installs both.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.bench.browser import CHROMIUM

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.browser

sync_api = pytest.importorskip("playwright.sync_api")
if not Path(CHROMIUM).exists():
    pytest.skip("Debian chromium not installed", allow_module_level=True)


@pytest.fixture
def page(pages):
    return pages()


def step_label(pg) -> str:
    return pg.locator("#text .um-step").inner_text()


def run_marker(pg) -> str:
    """The run the text view shows ('example' for a pre-baked trace) and whether it has ended."""
    return pg.evaluate("() => { const t = document.querySelector('#text .um-text'); "
                       "return t ? t.dataset.run + '/' + t.dataset.finished : ''; }")


def wait_run_done(pg, before: str = "example", timeout=60000):
    """Wait for a run other than `before` (a run id, or 'example') to be shown finished, and its link to be
    written; never for a fixed time."""
    pg.wait_for_function("(before) => { const t = document.querySelector('#text .um-text'); "
                         "return t && t.dataset.run !== before && t.dataset.finished === '1'; }",
                         arg=before, timeout=timeout)
    pg.wait_for_function("(before) => window.__umScrub && window.__umScrub.run && "
                         "window.__umScrub.run.run !== before && document.querySelector('#link').value.length > 0",
                         arg=before, timeout=timeout)


def test_page_loads_with_example(page, server):
    page.goto(server)
    page.wait_for_selector("#text .um-step", timeout=30000)       # the pre-baked trace, before any model call
    assert "step" in step_label(page)
    page.wait_for_selector("#mask-plot .js-plotly-plot", timeout=30000)


def test_run_renders_heatmaps_and_scrubs(page, server):
    page.goto(server)
    page.wait_for_selector("#text .um-text[data-run='example']", timeout=30000)
    page.click("#run")
    wait_run_done(page)
    page.wait_for_selector("#mask-plot .js-plotly-plot")
    page.wait_for_selector("#conf-plot .js-plotly-plot")
    last = step_label(page)
    n = int(last.split("/")[1].split("·")[0])
    page.locator("#step").fill("1")                                  # the slider, in the browser
    assert step_label(page).startswith(f"step 1 / {n}")
    assert page.locator("#text .um-mask").count() > 0               # masked slots at the first step
    page.click("#next")
    assert step_label(page).startswith("step 2 ")
    assert page.url.endswith("step=2") and page.locator("#link").input_value() == page.url  # a full URL, at the step


def test_url_parameters_restore_a_run(page, server):
    page.goto(server + "?decoder=llada&block=4&steps=2&gen_length=16&tau=0.7&step=3")
    wait_run_done(page)
    page.wait_for_function("() => document.querySelector('#text .um-step').innerText.startsWith('step 3 ')",
                           timeout=30000)
    assert page.locator("#block_size input[type=number]").input_value() == "4"
    assert page.locator("#steps input[type=number]").input_value() == "2"
    assert "decoder=llada" in page.locator("#link").input_value()


@pytest.mark.parametrize("prompt,message", [("", "empty"), ("Tom has 3 dogs and 4 cats. How many pets?", "does not know")],
                         ids=["empty", "unknown-words"])
def test_bad_prompt_shows_message_and_page_keeps_working(page, server, prompt, message):
    page.goto(server)
    page.wait_for_selector("#text .um-text[data-run='example']", timeout=60000)
    page.fill("#prompt textarea", prompt)
    page.click("#run")
    page.wait_for_selector(f"text=/{message}/", timeout=30000)
    if prompt:                                   # a prompt that decodes: wait for that run to end (Run is one at a time)
        wait_run_done(page)
    before = run_marker(page).split("/")[0]
    page.fill("#prompt textarea", "Ann has 3 apples. She buys 5 more. How many apples does she have now?")
    page.click("#run")
    wait_run_done(page, before)
    assert "Ann has 3 apples" in page.locator("#text").inner_text()


def test_clicking_a_heatmap_cell_or_token_selects_the_position(page, server):
    page.goto(server)
    page.wait_for_selector("#mask-plot .nsewdrag", timeout=30000)
    page.wait_for_timeout(1000)
    page.locator("#mask-plot").scroll_into_view_if_needed()      # a click lands only inside the viewport
    box = page.locator("#mask-plot .nsewdrag").first.bounding_box()
    page.mouse.click(box["x"] + box["width"] * 0.3, box["y"] + box["height"] * 0.5)
    page.wait_for_function("() => document.querySelector('#position').value !== ''", timeout=15000)
    first = int(page.locator("#position").input_value())
    page.wait_for_selector(f"text=position {first}", timeout=15000)   # the candidates view follows
    page.locator("#text .um-tok").nth(1).click()
    page.wait_for_function(f"() => document.querySelector('#position').value !== '{first}'", timeout=15000)


def test_simsd_run_shows_its_rounds_and_the_gif_export(page, server):
    page.goto(server + "?decoder=simsd&block_size=4&gen_length=32")
    wait_run_done(page)
    page.get_by_role("tab", name="SimSD").click()
    page.wait_for_selector("#simsd-plot .js-plotly-plot", timeout=30000)
    assert page.locator("#simsd-plot .bars").count() > 0            # the tokens-kept bars of each round
    page.click("#gif")                                               # the GIF is made on request
    page.wait_for_selector("#gif-file >> text=/\\.gif/", timeout=60000)


CHIPS_JS = """(html) => { const box = document.createElement('div'); box.innerHTML = html;
  return [...box.querySelectorAll('.um-step, [data-pos], .um-cand, .um-cand-row')].map(e =>
    [e.className, e.dataset.pos || '', e.title || '', e.getAttribute('style') || '', e.innerText || e.textContent]); }"""


def test_browser_scrubbing_agrees_with_the_python_views(page, server):
    """The browser redraws text and candidates from the run's data; at several steps and a selected position
    they equal what the Python views draw from the same data, and the cursors sit at the step."""
    from explorer import scrub
    page.goto(server + "?decoder=llada&block_size=4&steps=2&gen_length=16")
    wait_run_done(page)
    for plot in ("#mask-plot", "#conf-plot"):
        page.wait_for_selector(plot + " .js-plotly-plot .shapelayer", state="attached", timeout=30000)
    d = page.evaluate("() => window.__umScrub.run")
    pos = d["pos"][len(d["pos"]) // 2]
    for s in sorted({1, max(1, d["n"] // 2), d["n"]}):
        page.locator("#step").fill(str(s))
        for selected in (None, pos):
            page.evaluate("(p) => window.__umScrub.select(p)", selected)
            shown = page.evaluate("() => document.querySelector('#text .um-text').outerHTML + "
                                  "document.querySelector('#candidates .um-cand').outerHTML")
            python = scrub.text_html(d, s - 1, selected, d["run"], True) + scrub.candidates_html(d, s - 1, selected)
            assert page.evaluate(CHIPS_JS, shown) == page.evaluate(CHIPS_JS, python), (s, selected)
        cursors = page.evaluate("() => ['mask-plot', 'conf-plot'].map(id => document.querySelector('#' + id + "
                                "' .js-plotly-plot').layout.shapes.filter(s => s.name === 'cursor-edge')[0].y0)")
        assert cursors == [s + 0.5, s + 0.5]            # along the lower edge of the step's row


def test_a_server_view_follows_the_settled_step(page, server):
    page.goto(server + "?decoder=tspd&block_size=4&gen_length=16")
    wait_run_done(page)
    page.get_by_role("tab", name="TSPD + CE").click()
    page.click("#prev")
    s = page.evaluate("() => window.__umScrub.step")
    page.wait_for_function("(s) => { const g = document.querySelector('#traj-plot .js-plotly-plot'); return g && "
                           "g.layout.shapes.some(x => x.name === 'cursor' && x.x0 === s); }", arg=s, timeout=20000)


def test_a_tour_stop_is_the_run_shown_everywhere(page, server):
    """Compare's A too: the SPEC of each run the page shows, unless the visitor has typed in A since (then A keeps
    theirs and a note says so, until "A: the run shown" follows the run again)."""
    from engine.records.trace import Trace
    from explorer.page.compare import spec_of
    spec = {n: spec_of(Trace.load(ROOT / "assets" / "examples" / f"{n}.npz")) for n in ("threshold", "s2d2")}
    a_is = "(s) => (document.querySelector('#spec-a textarea') || {}).value === s"
    page.goto(server)
    page.wait_for_selector("#text .um-text[data-run='example']", timeout=30000)
    page.locator("#more-tabs [role=tab]", has_text="Compare").first.click()
    page.wait_for_function(a_is, arg=spec["threshold"], timeout=30000)
    page.fill("#spec-a textarea", "ar:block_size=4")          # typed by hand: kept when the next run is shown
    assert "keeps" in page.inner_text("#spec-a-note")
    page.click("#run")
    wait_run_done(page)
    assert page.input_value("#spec-a textarea") == "ar:block_size=4"
    page.click("#compare-shown")                              # follows the run shown again
    page.wait_for_function(a_is, arg=spec["threshold"], timeout=30000)
    assert page.inner_text("#spec-a-note").strip() == ""
    page.click("#tour-start")
    page.wait_for_function(a_is, arg=spec["s2d2"], timeout=30000)
    page.wait_for_function("() => window.__umScrub.run && window.__umScrub.run.run === 'example' && "
                           "document.querySelector('#link').value.includes('decoder=s2d2')", timeout=30000)
    page.wait_for_selector("#export >> text=/unmask-s2d2/", timeout=30000)        # the export is the tour's run
    from engine.catalogue.catalogue import menu_label      # the menu shows the decoder in plain words
    page.wait_for_function("(l) => document.querySelector('#decoder input').value === l", arg=menu_label("s2d2"),
                           timeout=30000)


def test_no_text_runs_off_its_column(page, server):
    page.goto(server + "?decoder=threshold&gen_length=128&prompt=" + "Tell%20a%20story%20about%20a%20yak%20named%20Finn.")
    wait_run_done(page)
    wide = page.evaluate("() => [...document.querySelectorAll('#text, #text *, #candidates, #summary, #scrubber *')]"
                         ".filter(e => e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX === 'visible')"
                         ".map(e => e.id || e.className)")
    assert wide == []
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")


def test_a_hidden_tab_is_drawn_when_opened_at_the_step_shown(page, server):
    """A finished run draws only the visible tab; opening another draws its views there, cursor at the step."""
    page.goto(server + "?decoder=s2d2&block_size=4&gen_length=16&router=always")
    wait_run_done(page)
    assert page.locator("#verifier-plot .js-plotly-plot").count() == 0          # not drawn while hidden
    page.click("#prev")
    s = page.evaluate("() => window.__umScrub.step")
    page.get_by_role("tab", name="S2D2").click()
    page.wait_for_function("(s) => { const g = document.querySelector('#verifier-plot .js-plotly-plot'); return g && "
                           "g.layout.shapes.some(x => x.name === 'cursor-edge' && x.y0 === s + 0.5); }", arg=s,
                           timeout=30000)


def test_the_revisions_tab_follows_a_selected_position(page, server):
    page.goto(server + "?decoder=wino&block_size=4&gen_length=16&tau_wide=0.3&tau_narrow=0.9")
    wait_run_done(page)
    page.get_by_role("tab", name="Revisions").click()
    page.wait_for_selector("#wino-plot .js-plotly-plot", timeout=30000)
    pos = page.evaluate("() => window.__umScrub.run.pos[1]")
    page.evaluate("(p) => window.__umScrub.select(p)", pos)
    page.wait_for_function("(p) => { const g = document.querySelector('#history-plot .js-plotly-plot'); return g && "
                           "g.layout.title && g.layout.title.text.includes('position ' + p); }", arg=pos, timeout=30000)


def test_a_late_stale_ask_never_overwrites_the_selected_position(page, server):
    """The scrubber's first ask (no position) is held on the wire while the position is selected; the second ask
    is drawn, and the first, released afterwards, leaves it in place (asks are numbered; gradio's "always_last"
    would have replayed the first ask's data)."""
    page.goto(server + "?decoder=wino&block_size=4&gen_length=16&tau_wide=0.3&tau_narrow=0.9")
    wait_run_done(page)
    held = []

    def hold_first_ask(route):
        body = route.request.post_data or ""
        if '"views"' in body and not held:
            held.append(route)        # answered below, after the newer ask
        else:
            route.continue_()
    page.route("**/gradio_api/queue/join*", hold_first_ask)
    page.get_by_role("tab", name="Revisions").click()      # the tab's views: the first ask, without a position
    page.wait_for_selector("#wino-plot .js-plotly-plot", timeout=30000)
    deadline = 0
    while not held and deadline < 100:
        page.wait_for_timeout(100)
        deadline += 1
    assert held, "the tab's ask was never sent"
    pos = page.evaluate("() => window.__umScrub.run.pos[1]")
    page.evaluate("(p) => window.__umScrub.select(p)", pos)
    has_pos = ("(p) => { const g = document.querySelector('#history-plot .js-plotly-plot'); return g && "
               "g.layout.title && g.layout.title.text.includes('position ' + p); }")
    page.wait_for_function(has_pos, arg=pos, timeout=30000)
    held[0].continue_()
    page.wait_for_timeout(1500)       # the stale ask's answer (an empty history) would land within this
    assert page.evaluate(has_pos, pos)


def test_branch_here_forces_a_candidate_and_shows_both_futures(page, server):
    """From the pre-baked story at a middle step: select a masked slot, Branch here, force one of its candidates;
    both texts and both maps appear, the shared steps shaded."""
    page.goto(server)
    page.wait_for_selector("#text .um-text[data-run='example']", timeout=30000)
    n = int(step_label(page).split("/")[1].split("·")[0])
    mid = max(1, n // 2)
    page.locator("#step").fill(str(mid))
    page.locator("#text .um-mask").first.click()
    page.wait_for_function("() => document.querySelector('#position').value !== ''", timeout=15000)
    page.click("#branch-here")
    page.wait_for_selector(f"#branch-where >> text=after step {mid} of {n}", timeout=15000)
    page.wait_for_function("() => { const r = document.querySelector('#branch-where').getBoundingClientRect(); "
                           "return r.top >= -2 && r.top < innerHeight; }", timeout=5000)     # brought into sight
    page.wait_for_selector("#branch-where >> text=still masked", timeout=15000)
    page.locator("#branch-force label").last.click()
    page.click("#branch-run")
    page.wait_for_selector(f"#branch-out >> text=Branched after step {mid}", timeout=90000)
    assert "forced" in page.locator("#branch-out").inner_text()
    assert page.locator("#branch-out p b", has_text="the branch").count() == 1
    shaded = page.evaluate("() => [...document.querySelectorAll('.js-plotly-plot')].filter(p => p.layout && "
                           "(p.layout.shapes || []).some(s => s.name === 'shared prefix')).length")
    assert shaded == 2
    texts = page.locator("#branch-out").inner_text()
    link = page.locator("#branch-out a").get_attribute("href")
    assert link.startswith("?") and "branch=" in link
    page.goto(server + link)                      # the link decodes the run again, then the branch
    page.wait_for_selector(f"#branch-out >> text=Branched after step {mid}", timeout=90000)
    page.wait_for_function("() => { const r = document.querySelector('#branch-out').getBoundingClientRect(); "
                           "return r.top >= -2 && r.top < innerHeight; }", timeout=5000)     # in sight
    assert page.locator("#branch-out").inner_text() == texts



COUNT_FRAMES = """(() => { let n = 0; const raf = window.requestAnimationFrame;
  window.__frames = () => n; window.requestAnimationFrame = (f) => { n++; return raf.call(window, f); }; })()"""


def test_an_idle_page_asks_for_no_animation_frames(page, server):
    """gradio 6.31's loading tracker, removed while still pending, asked for a frame 60 times a second for as long
    as the page stayed open (~7 % of a core in an idle headless Chromium): the frame guard gives its timer ticks a
    100 ms timer instead (``explorer.page.frame_guard``). Counted at the browser's own requestAnimationFrame, under
    the guard; the page is opened and its example shown first. Nor does the open ask the server to draw again the
    views its load event sent: before, ``refill`` took the figures still being drawn (Plotly loads 1-2 s into an
    open) for dropped ones and asked for all four at every open: the server drew them twice."""
    asks = []
    page.on("request", lambda r: r.method == "POST" and '"views"' in (r.post_data or "") and asks.append(r.post_data))
    page.add_init_script(COUNT_FRAMES)
    page.goto(server)
    page.wait_for_selector("#text .um-text[data-run='example']", timeout=30000)
    page.wait_for_selector("#mask-plot .js-plotly-plot", timeout=30000)
    page.wait_for_timeout(3000)                      # the figures drawn, and refill's look at them (3 s at most)
    before = page.evaluate("() => window.__frames()")
    page.wait_for_timeout(2000)
    # before the guard: about 120; a loaded machine's late drawing may ask for a few
    assert page.evaluate("() => window.__frames()") - before <= 20
    assert asks == [], asks
