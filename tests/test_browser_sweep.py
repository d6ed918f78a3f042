"""The tuning loop in a real Chromium: sweep a data task (GSM8K) on a tiny random checkpoint offered by the operator,
pick a setting, list its wrong answers and open one as its run in the explorer."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tools.page.bench_ux import CHROMIUM
from tests.conftest import running_app

pytestmark = pytest.mark.browser
sync_api = pytest.importorskip("playwright.sync_api")
if not Path(CHROMIUM).exists():
    pytest.skip("Debian chromium not installed", allow_module_level=True)


def choose(pg, elem_id: str, option: str) -> None:
    """Pick an option of a gradio dropdown by the start of its label."""
    pg.click(f"#{elem_id} input")
    pg.get_by_role("option", name=re.compile("^" + re.escape(option))).first.click()


def test_a_gsm8k_sweeps_wrong_answer_opens_as_its_run(pages, tmp_path):
    from tests.families import write_llada
    model, _ = write_llada(tmp_path / "tinyllada")
    with running_app(tmp_path, forked=True, UNMASK_MODELS=str(model), UNMASK_MAX_SECONDS="240") as (url, _):
        pg = pages(1500, 1100)                    # screenshot under artifacts/ if the test fails
        pg.goto(url)
        pg.wait_for_selector("#text .um-text", timeout=120_000)
        choose(pg, "model", "tinyllada")
        pg.get_by_role("tab", name="Sweep").click()
        choose(pg, "sweep-task", "gsm8k")
        # τ 0.06, near the page's lowest (above 0.05): the random model's sampled tokens take ~100 forwards a problem
        pg.get_by_label("dial values (τ, γ, η, ...)").fill("0.06")
        pg.get_by_label("block sizes").fill("32")
        pg.fill("#sweep-n input[type=number]", "10")
        pg.press("#sweep-n input[type=number]", "Enter")
        # the sweep's progress, drawn once: the most progress bars visible at one time while it runs, counted at
        # each change of the page (a count at every animation frame kept Chromium drawing 60 frames a second)
        pg.evaluate("""() => { window.__umBars = 0; const count = () => { window.__umBars = Math.max(
          window.__umBars, [...document.querySelectorAll('.progress-level')].filter((e) => e.offsetParent !==
          null).length); }; window.__umBarsSeen = new MutationObserver(count);
          window.__umBarsSeen.observe(document.body, {subtree: true, childList: true, attributes: true,
                                                      characterData: true}); count(); }""")
        pg.click("#sweep")
        pg.wait_for_function("() => document.querySelector('#sweep-table') && "
                             "document.querySelector('#sweep-table').innerText.includes('threshold:tau=0.06')",
                             timeout=240_000)
        pg.wait_for_timeout(500)
        assert pg.evaluate("() => { window.__umBarsSeen.disconnect(); return window.__umBars; }") == 1
        choose(pg, "sweep-point", "threshold:tau=0.06")
        pg.wait_for_function("() => /wrong answers: [1-9]/.test(document.querySelector('#sweep-wrong')"
                             ".innerText)", timeout=30_000)
        choose(pg, "sweep-wrong", "#")
        pg.click("#sweep-open-wrong")
        pg.wait_for_function("() => { const t = document.querySelector('#text .um-text'); return t && "
                             "t.dataset.run !== 'example' && t.dataset.finished === '1' && "
                             "t.innerText.includes('Question:'); }", timeout=120_000)
        # the link of the run shown: the card's length and the seed the sweep gave the problem
        pg.wait_for_function("() => /gen_length=256/.test(document.querySelector('#link').value) && "
                             "/seed=\\d+/.test(document.querySelector('#link').value)", timeout=30_000)
        assert "10 problems per setting" in pg.inner_text("#sweep-table")
