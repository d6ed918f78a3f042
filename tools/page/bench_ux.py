"""What a newcomer meets, measured in Chromium: the first viewport at 1500×1100 and 390×844, the visible controls
per decoder, the tour's stops (tab, view and text on screen together, steps forward), and the opening example's
dial. The browser tests call the same functions (``tests/test_browser_ux.py``).

    python -m tools.page.bench_ux [--out results/bench_ux.json]

Controls are counted as a person sees them: every visible input of the run bar and the parameter panel (a
slider with its number box is one control), each button there, and each visible parameter box (collapsed or
open) as one more.
"""

from __future__ import annotations

from tools.bench.app import served
from tools.bench.browser import CHROMIUM, chromium, launch  # noqa: F401  (the browser tests read them here)
from tools.bench.report import bench_main

VIEWS_IN_SIGHT = ("#prompt", "#decoder", "#run", "#text")

IN_VIEW = """(sel) => { const e = document.querySelector(sel); if (!e || !e.getClientRects().length) return false;
  const r = e.getBoundingClientRect(); return r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight + 1 &&
  r.right <= innerWidth + 1 && r.height > 0; }"""
# an element laid out and of some height (a hidden gradio block has no offset parent)
SHOWN = "const shown = (e) => e && e.offsetParent !== null && e.getBoundingClientRect().height > 0;"
# each visible control of the run bar and the parameter panel, by its component's elem_id (or the box's title)
CONTROLS = """() => { const out = []; """ + SHOWN + """
  document.querySelectorAll('#run-bar [id], #params-col [id]').forEach((e) => {
    if (!shown(e) || !e.classList.contains('block') && e.tagName !== 'BUTTON') return;
    if (e.closest('[id^=box-]') && e.closest('[id^=box-]') !== e && !shown(e.closest('[id^=box-]'))) return;
    if (/^(box-|prompt$|examples$|model$|decoder$|run$|stop$|tour-start$)/.test(e.id) ||
        e.querySelector('input, textarea, select, button')) out.push(e.id); });
  return [...new Set(out.filter((id) => !['decoder-info', 'model-card', 'params-col', 'run-bar'].includes(id)))]; }"""
TAB_OPEN = "() => { const t = document.querySelector('#view-tabs [role=tab][aria-selected=true]'); " \
           "return t ? t.innerText.trim() : ''; }"


def opened(pg, base: str, query: str = "") -> None:
    pg.goto(base + query)
    pg.wait_for_selector("#text .um-text", timeout=120_000)
    pg.wait_for_function("() => window.__umScrub && window.__umScrub.run", timeout=60_000)


def first_view(pg) -> dict:
    """Which of the prompt, the decoder, Run and the text view lie inside the viewport, unscrolled."""
    pg.evaluate("() => window.scrollTo(0, 0)")
    return {sel: pg.evaluate(IN_VIEW, sel) for sel in VIEWS_IN_SIGHT}


def controls(pg) -> list[str]:
    return pg.evaluate(CONTROLS)


# the decoder's own box of controls shown with a control in it (a page without such a box: true)
BOX_SHOWN = """(id) => { const b = document.getElementById(id); if (!b) return true; """ + SHOWN + """
  return shown(b) && [...b.querySelectorAll('input, textarea, select')].some(shown); }"""


def choose_decoder(pg, name: str) -> None:
    """Pick a decoder in the menu by its value (the menu shows plain words); return once its card describes it and
    its own box of controls is shown (the card's words can land first: a count of the controls read then saw 14 of
    S2D2's 32)."""
    from engine.catalogue import catalogue
    pg.click("#decoder input")
    pg.get_by_role("option", name=catalogue.menu_label(name)).click()
    pg.wait_for_function("(t) => document.querySelector('#decoder-info').innerText.includes(t)",
                         arg=catalogue.DECODERS[name].summary.split("**")[1], timeout=20_000)
    pg.wait_for_function(BOX_SHOWN, arg=f"box-{name}", timeout=20_000)


def choose_model(pg, name: str, decoder: str) -> None:
    """Pick a model in the picker; wait until the decoder it brings (``decoder``) is described."""
    import re

    from engine.catalogue import catalogue
    pg.click("#model input")
    pg.get_by_role("option", name=re.compile("^" + re.escape(name))).click()
    pg.wait_for_function("(t) => document.querySelector('#decoder-info').innerText.includes(t)",
                         arg=catalogue.DECODERS[decoder].summary.split("**")[1], timeout=20_000)


SHOWN = """() => { const q = (s) => document.querySelector(s), v = (s) => (q(s) || {}).value;
  const run = window.__umScrub && window.__umScrub.run;
  return {decoder: v('#decoder input'), model: v('#model input'), link: v('.um-link'),
    labels: (document.body.innerText.match(/step \\d+ \\/ \\d+/g) || []),
    tabs: [...document.querySelectorAll('#view-tabs [role=tab]')].filter(b => b.style.display !== 'none' &&
      b.offsetParent !== null).map(b => b.innerText.trim()),
    n: run ? run.n : null, step: window.__umScrub ? window.__umScrub.step : null}; }"""


def shown_run(pg) -> dict:
    """What the page says of the run shown: the decoder and model boxes, the link, every "step s / n" label (the
    slider's and the text view's), the view tabs shown, and the scrubber's run length and step."""
    return pg.evaluate(SHOWN)


def at_stop(pg, i: int) -> None:
    """Until stop i's card and target are shown and the decoder box shows a menu's words: while a stop's model
    replaces the menu of decoders, the box shows the bare value for a moment (under load, past a fixed wait)."""
    from engine.catalogue import catalogue
    pg.wait_for_function("(i) => { const c = document.querySelector('#tour-card .um-tour'); return c && "
                         "c.dataset.stop == i && document.querySelector('.um-tour-target'); }", arg=i, timeout=60_000)
    pg.wait_for_function("(ls) => ls.includes((document.querySelector('#decoder input') || {}).value)",
                         arg=[catalogue.menu_label(n) for n in catalogue.DECODERS], timeout=20_000)
    pg.wait_for_timeout(400)


def tour(pg, each=None) -> list[dict]:
    """Every stop in turn: the open tab, whether the stop's view and its text card are both inside the viewport,
    whether they overlap, the run and step shown, and what the page says of the run (``shown_run``). ``each(i)``:
    called at stop i once that is read (a test's further checks of the same stop)."""
    from explorer.page.tour import STOPS
    out = []
    pg.click("#tour-start")
    for i, stop in enumerate(STOPS):
        if i:
            pg.click("#tour-next")
        at_stop(pg, i)
        boxes = pg.evaluate("(t) => [document.getElementById(t), document.getElementById('tour-card')].map(e => {"
                            "const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; })",
                            stop.target)
        (vl, vt, vr, vb), (cl, ct, cr, cb) = boxes
        out.append(dict(stop=stop.title, tab=pg.evaluate(TAB_OPEN), wanted_tab=stop.tab, target=stop.target,
                        view_in_sight=pg.evaluate(IN_VIEW, "#" + stop.target),
                        card_in_sight=pg.evaluate(IN_VIEW, "#tour-card"),
                        text_in_card=pg.evaluate("() => !!document.querySelector('#tour-card .um-tour-text .um-text')"),
                        overlap=not (vr <= cl or cr <= vl or vb <= ct or cb <= vt),
                        example=stop.example, step=pg.evaluate("() => window.__umScrub.step"),
                        errors=pg.evaluate("() => [...document.querySelectorAll('.toast-body')].map(t => t.innerText)"
                                           ".filter(t => /error/i.test(t))"), shown=shown_run(pg)))
        if each is not None:
            each(i)
    return out


TUNE = """async ([dial, v0, dv, sym]) => { const r = document.querySelector('#' + dial + ' input[type=range]');
  const frame = () => new Promise((res) => requestAnimationFrame(() => res())), out = [];
  for (let i = 0; i < 11; i++) { const t = performance.now(); r.value = (v0 + dv * i).toFixed(2);
    r.dispatchEvent(new Event('input', {bubbles: true})); await frame(); out.push(performance.now() - t); }
  const gd = document.querySelector('#conf-plot .js-plotly-plot');
  const marks = gd.data.find((t) => t.name === 'would pass ' + sym);
  const seen = (e) => { if (!e || !e.getClientRects().length || getComputedStyle(e).display === 'none') return false;
    const b = e.getBoundingClientRect(); return b.top >= 0 && b.bottom <= innerHeight && b.height > 0; };
  const peek = document.getElementById('um-tune-peek'), pm = peek && peek.data &&
    peek.data.find((t) => t.name === 'would pass ' + sym);
  return [out, document.getElementById('tune-note').textContent, marks ? marks.x.length : -1,
          seen(gd) || (seen(peek) && !!pm && pm.x.length === marks.x.length)]; }"""


QUIET_S = 3.0


def tune_by_eye(pg, dial: str = "tau", v0: float = 0.9, dv: float = -0.08, sym: str = "τ") -> dict:
    """Drag a dial (τ over the opening example by default; input events, no release) from v0 in 10 steps of dv,
    once the page has sent nothing for QUIET_S: the overlay's latency per event, its note and its marks, the
    requests the page sent meanwhile (``sent``: address and body), and whether the preview is in sight (the map
    itself, or its pinned copy carrying the same marks)."""
    import statistics
    import time
    sent = []
    listener = lambda r: sent.append(f"{r.url} {(r.post_data or '')[:80]}")  # noqa: E731
    pg.wait_for_selector("#conf-plot .js-plotly-plot", timeout=60_000)   # drawn after the text on a busy machine
    # what the page still had to send from before is not the drag's: after a link's run is shown the scrubber asks
    # for its server-drawn views ~2.4 s later (a CI run's drag, started sooner, counted that ask)
    pg.on("request", listener)
    quiet_since, deadline = time.monotonic(), time.monotonic() + 30
    while time.monotonic() < deadline and (sent or time.monotonic() - quiet_since < QUIET_S):
        if sent:
            sent.clear()
            quiet_since = time.monotonic()
        pg.wait_for_timeout(100)
    times, note, marks, preview = pg.evaluate(TUNE, [dial, v0, dv, sym])
    pg.remove_listener("request", listener)
    return dict(median_ms=statistics.median(times), max_ms=max(times), note=note, marks=marks, requests=len(sent),
                preview_in_sight=preview, sent=sent)


def phone_run(pg, base: str) -> dict:
    """At 390×844: Run inside the first viewport, and the text view in sight once Run is pressed."""
    opened(pg, base)
    run_in_sight = pg.evaluate(IN_VIEW, "#run")
    before = pg.evaluate("() => window.__umScrub.run.run")
    pg.click("#run")
    pg.wait_for_function("(b) => { const t = document.querySelector('#text .um-text'); return t && "
                         "t.dataset.run !== b && t.dataset.finished === '1'; }", arg=before, timeout=120_000)
    top = pg.evaluate("() => document.getElementById('text').getBoundingClientRect().top")
    return dict(run_in_sight=run_in_sight, text_top_after_run=top, text_in_sight=0 <= top < 844)


def measure() -> dict:
    with served() as app, chromium() as browser:
        base = app.url
        pg = browser.new_page(viewport={"width": 1500, "height": 1100})
        opened(pg, base)
        res = dict(first_view=first_view(pg), controls=controls(pg), tune=tune_by_eye(pg))
        choose_decoder(pg, "s2d2")
        res["controls_s2d2"] = controls(pg)
        choose_model(pg, "unmask-uniform-small", "uniform")
        res["controls_uniform"] = controls(pg)
        opened(pg, base)
        res["tour"] = tour(pg)
        phone = browser.new_page(viewport={"width": 390, "height": 844})
        res["phone"] = phone_run(phone, base)
    return res


def table(res: dict) -> str:
    fv, tour_rows = res["first_view"], res["tour"]
    lines = ["| check | result |", "|---|---|",
             f"| 1500×1100, first viewport: prompt, decoder, Run, text view | "
             f"{', '.join(k.strip('#') + (' ✓' if v else ' ✗') for k, v in fv.items())} |",
             f"| visible controls at first load (threshold) | {len(res['controls'])} |",
             f"| visible controls with S2D2 chosen | {len(res['controls_s2d2'])} |",
             f"| visible controls on the uniform-noise model (`uniform`) | {len(res['controls_uniform'])}; B, τ, "
             f"steps {'hidden' if not {'block_size', 'tau', 'steps'} & set(res['controls_uniform']) else 'shown'} |",
             f"| 390×844: Run in the first viewport | {'yes' if res['phone']['run_in_sight'] else 'no'} |",
             f"| 390×844: text view in sight after Run | {'yes' if res['phone']['text_in_sight'] else 'no'} "
             f"(top at {res['phone']['text_top_after_run']:.0f} px) |"]
    t = res["tune"]
    lines.append(f"| tune by eye (τ dragged on the opening example): overlay update per input event | median "
                 f"{t['median_ms']:.0f} ms, max {t['max_ms']:.0f} ms, {t['requests']} requests, {t['marks']} "
                 f"cells marked at the last value |")
    ok = sum(r["tab"] == r["wanted_tab"] and r["view_in_sight"] and r["card_in_sight"] and not r["overlap"]
             for r in tour_rows)
    lines.append(f"| tour stops with their tab open, view and card on screen, not overlapping | {ok} / "
                 f"{len(tour_rows)} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    bench_main(__doc__, "results/bench_ux.json", measure, table, argv)


if __name__ == "__main__":
    main()
