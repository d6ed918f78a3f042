"""Opening a recorded trace in the page (explorer.recorded, app.py --trace, UNMASK_TRACES): the operator's files
only, every view of a run drawn from it, a visitor choosing among them by name and never by path; and in a real
browser, the page opening one and scrubbing it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.errors import UserError
from engine.models.model import load_model
from engine.record import Recorder
from engine.records.trace import Revision, Trace
from explorer import export, gif, recorded, scrub
from explorer.registry import tabs_shown
from explorer.render import render_panels, render_views
from explorer.state import parse_query
from explorer.views.summary import render_summary
from tests.record_loops import remdm_cap
from tests.test_record import PROMPT
from tools.bench.browser import CHROMIUM
from tools.record_examples import llada_generate


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A folder of two recorded traces (the worked example; a re-masking loop), a note and a subfolder."""
    d = tmp_path_factory.mktemp("traces")
    llada_generate.main(["--out", str(d / "llada.npz"), "--steps", "16"])
    tiny = load_model("tiny", device="cpu")
    ids = tiny.encode_prompt(PROMPT)
    with Recorder(tiny.model, tiny.mask_token_id, len(ids), tiny.tokenizer, block_size=4, loop="remdm_cap") as rec:
        rec.finish(remdm_cap(tiny, ids, 16, 4, 4, eta=0.4, seed=3))
    rec.save(d / "remask.npz")
    (d / "notes.txt").write_text("not a trace")
    (d / "sub").mkdir()
    (d / "sub" / "hidden.npz").write_bytes((d / "llada.npz").read_bytes())
    return d


def test_a_folder_gives_its_own_traces_by_name(folder):
    got = recorded.load_recorded([str(folder)])
    assert list(got) == ["llada", "remask"]                 # by name; the note and the subfolder left alone
    assert recorded.load_recorded([str(folder / "llada.npz"), str(folder / "llada.npz")]).keys() == \
        {"llada", "llada-2"}


@pytest.mark.parametrize("make,message", [
    (lambda d: d / "absent.npz", "is not a trace file or a folder"),
    (lambda d: (d / "bad.npz").write_bytes(b"PK\x03\x04 garbage") and d / "bad.npz", "bad.npz: not a trace"),
])
def test_what_is_not_a_trace_stops_the_start_in_one_line(tmp_path, make, message):
    with pytest.raises(UserError, match=message) as e:
        recorded.load_recorded([str(make(tmp_path))])
    assert "\n" not in str(e.value)


def test_a_visitor_picks_by_name_never_by_path(folder):
    page = SimpleNamespace(recorded=recorded.load_recorded([str(folder)]))
    values, problems = parse_query({"trace": "remask"})
    assert values == {"trace": "remask"} and not problems
    assert recorded.on_load(page, values).meta.summary["recorded"]["loop"] == "remdm_cap"
    for name in ("../../etc/passwd", str(folder / "sub" / "hidden"), "sub/hidden"):
        assert recorded.on_load(page, {"trace": name}) is page.recorded["llada"]        # the first, not a path
    assert recorded.on_load(page, {"decoder": "threshold"}) is None       # a link to a decoder: its example
    assert recorded.on_load(SimpleNamespace(recorded={}), {}) is None


def test_a_link_to_a_trace_not_offered_says_so(folder, monkeypatch):
    """A stale ``?trace=`` link warns as the link's other problems do, then shows the first trace (not as if it
    were the linked one); a name offered warns nothing."""
    from explorer.page import share
    warned = []
    monkeypatch.setattr(share.gr, "Warning", warned.append)
    page = SimpleNamespace(models=("m",), recorded=recorded.load_recorded([str(folder)]))
    values, run = share.url_values(page, SimpleNamespace(query_params={"trace": "gone", "step": "2"}))
    assert values == {"step": 2} and not run
    assert warned == ["In the link: trace=&#x27;gone&#x27; is not offered here"]
    assert share.url_values(page, SimpleNamespace(query_params={"trace": "remask"}))[0] == {"trace": "remask"}
    assert len(warned) == 1


def test_every_view_of_a_run_draws_from_a_recorded_trace(folder, tmp_path):
    """Text, maps, candidates, summary (with its note on what a recorded run cannot show), the scrub payload,
    the exports and the GIF; a re-masking loop's revisions fill the Revisions tab."""
    tr = recorded.load_recorded([str(folder)])["remask"]
    assert "Revisions" in tabs_shown(tr) and {c for _, _, c, _, _ in tr.revisions()} == {int(Revision.REMASK)}
    for s in (0, len(tr.records) // 2, len(tr.records) - 1):
        panels, views = render_panels(tr, s), render_views(tr, s)
        assert "um-text" in panels["text"] and views["mask"] is not None and views["conf"] is not None
    assert "Recorded from outside (remdm_cap)" in render_summary(tr)
    assert scrub.payload(tr)
    paths = export.export_files(tr, tmp_path)
    assert {Path(p).suffix for p in paths} == {".json", ".csv", ".npz"}
    assert Trace.load(next(p for p in paths if p.endswith(".npz"))).meta.decoder == "recorded"
    assert gif.decode_gif(tr)[:6] in (b"GIF87a", b"GIF89a")


def test_app_takes_trace_flags_and_the_setting(monkeypatch, folder):
    from app import traces_named
    from engine.settings import SettingError
    monkeypatch.setenv("UNMASK_TRACES", f"{folder}/llada.npz, {folder}")
    assert traces_named(["--trace", "x.npz", "--trace", "y"]) == [f"{folder}/llada.npz", str(folder), "x.npz", "y"]
    for argv in (["--trace"], ["--traces", "x"], ["x.npz"]):
        with pytest.raises(SettingError, match="app.py takes --trace PATH"):
            traces_named(argv)


@pytest.mark.browser
def test_the_page_opens_a_recorded_trace_and_scrubs_it(folder, tmp_path):
    """The real app with UNMASK_TRACES: on load the first recorded trace, its text at its last step, the slider
    moving through its forwards; ``?trace=remask`` the re-masking one, with its Revisions tab."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium not installed")
    from tools.local_app import running_app
    from tools.page.bench_ux import launch
    llada = Trace.load(folder / "llada.npz")
    with running_app(tmp_path, forked=True, UNMASK_TRACES=str(folder)) as (url, _), sync_api.sync_playwright() as p:
        b = launch(p)
        pg = b.new_page(viewport={"width": 1400, "height": 1400})
        pg.goto(url)
        pg.wait_for_selector("#text .um-step", timeout=60000)
        n = len(llada.records)
        assert pg.locator("#text .um-step").inner_text().startswith(f"step {n} / {n}")
        pg.wait_for_function("() => document.body.innerText.includes('Recorded from outside')", timeout=30000)
        pg.locator("#step").fill("1")
        assert pg.locator("#text .um-step").inner_text().startswith(f"step 1 / {n}")
        assert pg.locator("#text .um-mask").count() > 0
        pg.wait_for_selector("#mask-plot .js-plotly-plot", timeout=30000)
        pg.goto(url + "?trace=remask")
        pg.wait_for_function("() => document.body.innerText.includes('(remdm_cap)')", timeout=60000)
        assert pg.get_by_role("tab", name="Revisions").count() == 1
        b.close()


def test_nothing_here_loads_torch_in_the_page():
    """explorer.recorded reads traces without torch (explorer/ never imports it)."""
    import subprocess
    import sys
    code = "import explorer.recorded, sys; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=str(Path(__file__).resolve().parent.parent))
    assert out.stdout.strip() == "False", out.stderr[-500:]
