"""Every re-run says so, and the keys work, in a real Chromium (one page load): a link's run and a tuning slider
moved with the keys each turn the Run button busy and stream a progress line (steps done, slots still to decide)
with the checker silent and the slider waiting, until the run ends and the text's step counter and the slider's
agree; keys moved during a run re-run after it, at the dial's last value, busy too; ← / → step and space plays,
as the scrubber's line says."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.page import bench_ux as ux

pytestmark = pytest.mark.browser
sync_api = pytest.importorskip("playwright.sync_api")
if not Path(ux.CHROMIUM).exists():
    pytest.skip("Debian chromium not installed", allow_module_level=True)
# a run long enough to stream (no stop at the end of the story) on a prompt the checker knows, at a seed of its own
# (``fresh_seed``: a greedy decode, the same run, not served whole from the page's cache)
LINK = "?prompt=Tell+a+story+about+a+yak+named+Finn.&decoder=threshold&tau=0.99&block_size=4&gen_length=256" \
       "&stop_at_eos=0&seed={}"
# every distinct state of the button, the text's step line, the slider's label and the checker card, as painted
# (looked at once an animation frame: what a person sees, not the DOM between two updates of one message)
WATCH = """() => { window.__umSeen = []; const snap = () => { const b = document.querySelector('#run');
  const h = document.querySelector('#text .um-step'), l = document.querySelector('#step-label');
  const cards = [...document.querySelectorAll('#summary .um-card-l')].map((e) => e.innerText.toLowerCase());
  const s = {button: b ? b.innerText.trim() : '', head: h ? h.innerText : '', label: l ? l.innerText : '',
             checker: cards.includes('checker')};
  const last = window.__umSeen[window.__umSeen.length - 1];
  if (!last || JSON.stringify(last) !== JSON.stringify(s)) window.__umSeen.push(s); };
  const tick = () => { snap(); requestAnimationFrame(tick); }; tick(); }"""
IDLE = "() => (document.querySelector('#run') || {innerText: ''}).innerText.trim() === 'Run' && " \
       "document.querySelector('#text .um-text[data-finished=\"1\"]')"


def seen(pg) -> list[dict]:
    out = pg.evaluate("() => window.__umSeen.splice(0)")
    assert out, "nothing seen"
    return out


def streamed_busy(states: list[dict]) -> None:
    """The button busy while the run streams, a progress line and no checker then, both counters agree at the
    end."""
    streaming = [s for s in states if s["head"].startswith("decoding…")]
    assert streaming, states
    busy = [s["button"] == "Running…" and not s["checker"] and s["label"] == "step – / –" for s in streaming]
    assert all(busy), [s for s, b in zip(streaming, busy) if not b]
    assert all("slots still to decide" in s["head"] for s in streaming), streaming
    end = states[-1]
    assert end["button"] == "Run" and end["checker"], end
    assert end["head"].split(" · ")[0] == end["label"], end           # one step counter


def test_a_link_and_a_keyboard_retune_show_busy_and_the_keys_step_and_play(pages, server, fresh_seed):
    pg = pages(1500, 1000)
    pg.add_init_script("document.addEventListener('DOMContentLoaded', " + WATCH + ")")
    pg.goto(server + LINK.format(fresh_seed))
    pg.wait_for_function(IDLE, timeout=180_000)
    pg.wait_for_function("() => window.__umScrub && window.__umScrub.run", timeout=60_000)
    streamed_busy(seen(pg))
    # the views line names the tabs this run leaves out (all but Decode for a threshold run), no others
    from explorer.registry import TABS
    shown = pg.evaluate("() => window.__umScrub.run.tabs")
    named = pg.evaluate("() => [...document.querySelectorAll('#um-more-views [data-tab]')]"
                        ".filter((e) => e.offsetParent !== null).map((e) => e.dataset.tab)")
    assert set(named) == set(TABS) - set(shown) - {"Decode"} and "S2D2" in named, (named, shown)
    # τ from the keys: a re-run when they rest. A rest mid-way (CI's loaded host made one between two presses)
    # starts a run; the keys moved during it re-run once it ends, at the value the dial has then, and that run is
    # the one the page ends on (between the two the page is idle for a moment: waiting for "Run" is not enough)
    pg.focus("#tau input[type=range]")
    pg.keyboard.press("ArrowLeft")
    pg.wait_for_function("() => document.querySelector('#run').innerText.trim() === 'Running…'", timeout=60_000)
    pg.keyboard.press("ArrowLeft")
    pg.keyboard.press("ArrowLeft")
    tau = float(pg.input_value("#tau input[type=range]"))
    pg.wait_for_function(f"() => {{ const r = window.__umScrub.run, t = document.querySelector('#text .um-text'); "
                         f"return r && t && t.dataset.finished === '1' && "
                         f"Math.abs(parseFloat(new URLSearchParams(r.query).get('tau')) - {tau}) < 1e-9 && "
                         f"document.querySelector('#run').innerText.trim() === 'Run'; }}", timeout=180_000)
    assert f"tau={tau:g}" in pg.url, pg.url
    pg.wait_for_timeout(500)
    states = seen(pg)
    assert any(s["button"] == "Running…" for s in states), states
    streamed_busy(states)
    assert pg.evaluate("() => document.querySelectorAll('#text .um-text').length") == 1
    # the keys on the page (focus off the controls): ← / → step, space plays; the scrubber's line says so
    assert "← / → step" in pg.inner_text("#keys-help") and "space plays" in pg.inner_text("#keys-help")
    pg.evaluate("() => document.activeElement.blur()")
    n = pg.evaluate("() => window.__umScrub.step")
    pg.keyboard.press("ArrowLeft")
    pg.keyboard.press("ArrowLeft")
    pg.keyboard.press("ArrowRight")
    assert pg.evaluate("() => window.__umScrub.step") == n - 1
    assert pg.inner_text("#step-label").startswith(f"step {n - 1} / ")
    pg.keyboard.press("Home")                         # nothing of ours: the page may scroll
    pg.evaluate("() => window.__umScrub.go(1)")
    pg.keyboard.press(" ")
    pg.wait_for_function("() => window.__umScrub.step >= 3", timeout=10_000)
    pg.keyboard.press(" ")                            # pauses

