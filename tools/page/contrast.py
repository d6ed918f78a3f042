"""WCAG contrast of what the page draws, measured in the browser from computed colours (the dark theme's check,
``tests/test_browser_dark.py``).

Text: its colour (``fill`` for SVG text) against the backgrounds behind it, composited from the root down with
every ancestor's opacity applied to the text; AA asks 4.5:1, or 3:1 for large text (24 px, or 18.66 px bold).
Controls (buttons, selects, text and number inputs): the part that shows where the control is, its border or its
fill, whichever stands out more, against what is behind the control; AA asks 3:1. Heatmap cells' own numbers and
hover labels are left out: plotly colours them against their cell, which is an image, not a computed colour; so is a
disabled control, which WCAG exempts.

    python -m tools.page.contrast URL [--dark]      # prints the failures of a running page
"""

from __future__ import annotations

import argparse

# the app's own parts: its HTML blocks, the tour's card and every Plotly figure
SCOPES = ("#summary", "#delta", "#text", "#legend", "#candidates", "#scrubber", "#tour-card", "#um-more-views",
          "#branch-out", ".js-plotly-plot")

MEASURE = """(scopes) => {
  const parse = (c) => { const m = /rgba?\\(([^)]+)\\)/.exec(c || ''); if (!m) return null;
    const p = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
  const over = (top, bot) => [0, 1, 2].map((i) => top[i] * top[3] + bot[i] * (1 - top[3])).concat([1]);
  const lin = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
  const lum = (c) => 0.2126 * lin(c[0]) + 0.7152 * lin(c[1]) + 0.0722 * lin(c[2]);
  const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
  const chain = (el) => { const out = []; for (let e = el; e; e = e.parentElement) out.unshift(e); return out; };
  const behind = (el) => { let bg = [255, 255, 255, 1], alpha = 1;   // the canvas is white under everything
    for (const e of chain(el)) { const cs = getComputedStyle(e); alpha *= parseFloat(cs.opacity);
      const c = parse(cs.backgroundColor); if (c && c[3] > 0) bg = over(c, bg); }
    return [bg, alpha]; };
  const shown = (e) => { const r = e.getBoundingClientRect(); const cs = getComputedStyle(e);
    return r.width > 0 && r.height > 0 && cs.visibility !== 'hidden' && e.getClientRects().length > 0; };
  const name = (e) => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') +
    (typeof e.className === 'string' && e.className ? '.' + e.className.trim().split(/\\s+/).join('.') : '');
  const texts = [], controls = [], seen = new Set();
  for (const scope of scopes) for (const root of document.querySelectorAll(scope)) {
    if (!shown(root)) continue;
    for (const e of [root, ...root.querySelectorAll('*')]) {
      if (seen.has(e) || !shown(e)) continue; seen.add(e);
      // and a disabled control: WCAG exempts an inactive component (the tour's Back at its first stop)
      if (e.closest('.heatmaplayer, .hoverlayer, .modebar, button:disabled')) continue;
      const svg = e instanceof SVGElement, cs = getComputedStyle(e);
      const own = [...e.childNodes].filter((n) => n.nodeType === 3).map((n) => n.textContent).join('').trim();
      const field = ['INPUT', 'SELECT', 'TEXTAREA'].includes(e.tagName) && e.type !== 'range';
      if (own || field && (e.value || '').trim()) {
        const [bg, alpha] = behind(e), fg = parse(svg ? cs.fill : cs.color);
        if (!fg) continue;
        const px = parseFloat(cs.fontSize), bold = parseInt(cs.fontWeight) >= 700;
        const need = px >= 24 || (px >= 18.66 && bold) ? 3 : 4.5;
        const r = ratio(over([fg[0], fg[1], fg[2], fg[3] * alpha], bg), bg);
        texts.push({el: name(e), text: (own || e.value).slice(0, 30), ratio: +r.toFixed(2), need});
      }
      if (e.matches('button, select, input:not([type=range]):not([type=hidden]), textarea')) {
        const outside = behind(e.parentElement)[0], [inside] = behind(e);
        const edge = parseFloat(cs.borderTopWidth) > 0 ? parse(cs.borderTopColor) : null;
        const r = Math.max(ratio(inside, outside), edge && edge[3] > 0 ? ratio(over(edge, outside), outside) : 1);
        controls.push({el: name(e), text: (e.innerText || e.value || '').slice(0, 30), ratio: +r.toFixed(2), need: 3});
      }
    }
  }
  return {texts, controls, dark: document.body.classList.contains('dark')};
}"""


def measure(pg, scopes=SCOPES) -> dict:
    """{"texts": [...], "controls": [...], "dark": bool} for the page's current state (each item: el, text,
    ratio, need)."""
    return pg.evaluate(MEASURE, list(scopes))


def settled(pg) -> None:
    """Waits until the figures are drawn and no part of the text view is faded (gradio fades an output while its
    event runs: a measure then would read the fade, not the theme)."""
    pg.wait_for_selector(".js-plotly-plot .main-svg", state="attached", timeout=60_000)
    for _ in range(2):      # twice, apart: a fade may start just after the first look
        pg.wait_for_function("() => { for (let e = document.querySelector('#text .um-text'); e; e = e.parentElement) "
                             "if (getComputedStyle(e).opacity !== '1') return false; return true; }", timeout=60_000)
        pg.wait_for_timeout(300)


# every CSS transition and animation at its end state at once: gradio fades its status tracker in over 0.1 s (text
# of a tracker 0.06 opaque read 1.1:1 to axe in a loaded run) and fades a pending output; what the eye reads, and
# what the checks measure, is where each fade ends, not a frame inside it
NO_FADES = "*, *::before, *::after { transition: none !important; animation: none !important; }"


def without_fades(pg) -> None:
    pg.add_style_tag(content=NO_FADES)


def failures(m: dict) -> list[dict]:
    return [x for x in m["texts"] + m["controls"] if x["ratio"] < x["need"]]


# the mask map's "masked" colour composited over the page's own background: its contrast ratio to the page
MASKED_CELL = r"""() => { const gd = document.querySelector('#mask-plot .js-plotly-plot'); if (!gd) return null;
  const rgba = (c) => /rgba?\(([^)]+)\)/.exec(c)[1].split(',').map(Number);
  const [r, g, b, a] = rgba(gd.data[0].colorscale[0][1]), bg = rgba(getComputedStyle(document.body).backgroundColor);
  const lin = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
  const lum = (c) => 0.2126 * lin(c[0]) + 0.7152 * lin(c[1]) + 0.0722 * lin(c[2]);
  const cell = [r, g, b].map((v, i) => v * (a ?? 1) + bg[i] * (1 - (a ?? 1)));
  const [x, y] = [lum(cell), lum(bg)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); }"""
PANELS = ("() => [...document.querySelectorAll('.js-plotly-plot .main-svg')].filter((e) => e.getClientRects().length)"
          ".map((e) => getComputedStyle(e).backgroundColor)")


def dark_problems(pg, figures: bool = True) -> list[str]:
    """What the dark theme gets wrong on the page as it is now (empty: nothing), once it has settled: text or a
    control under AA, a white figure panel, the mask map's masked cells a bright block (were 13:1) rather than a
    dark grey. ``figures``: the page shows the figures (the masked cells are checked)."""
    settled(pg)
    m = measure(pg)
    out = [] if m["dark"] else ["the page is not in dark mode"]
    # not vacuous: the text view's chips, the summary, the scrubber's four buttons and its fields, the figures' axes
    if len(m["texts"]) <= 60 or len(m["controls"]) < 6:
        out.append(f"too little measured: {len(m['texts'])} texts, {len(m['controls'])} controls")
    out += [f"{x['el']} {x['text']!r}: {x['ratio']}:1, needs {x['need']}:1" for x in failures(m)]
    panels = pg.evaluate(PANELS)
    if not set(panels) <= {"rgba(0, 0, 0, 0)"} or (figures and not panels):
        out.append(f"figure panels {panels}")
    cell = pg.evaluate(MASKED_CELL) if figures else None
    if figures and not (cell and 1.1 < cell < 2):
        out.append(f"the masked cells at {cell}:1 against the page")
    return out


def main() -> None:
    from playwright.sync_api import sync_playwright

    from tools.page.bench_ux import launch, opened
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("url")
    ap.add_argument("--dark", action="store_true", help="the browser in dark mode")
    a = ap.parse_args()
    with sync_playwright() as p:
        b = launch(p)
        pg = b.new_page(viewport={"width": 1500, "height": 1000}, color_scheme="dark" if a.dark else "light")
        opened(pg, a.url)
        settled(pg)
        m = measure(pg)
        print(f"{len(m['texts'])} texts, {len(m['controls'])} controls; dark: {m['dark']}")
        for x in failures(m):
            print(f"  {x['ratio']:.2f} < {x['need']}  {x['el']}  {x['text']!r}")
        b.close()


if __name__ == "__main__":
    main()
