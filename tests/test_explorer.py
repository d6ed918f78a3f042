"""Every view renders from a saved trace with no model (the explorer never touches torch)."""

import subprocess
import sys

import numpy as np
import pytest

from engine.decoders import build_decoder
from engine.runtime.loop import Generation
from engine.records.trace import Trace
from explorer.grid import MASKED, NEW, Grid
from explorer.views import heatmaps
from explorer.views.summary import render_summary
from explorer.views.text import render_text


@pytest.fixture(scope="module")
def saved_trace(adapter, tmp_path_factory):
    tr = Generation(adapter, "Kate has 40 shells . She loses 8 of them . How many shells does she have now ?",
                    build_decoder("threshold", tau=0.7, block_size=4, gen_length=16, stop_at_eos=False)).run()
    path = tmp_path_factory.mktemp("tr") / "trace.npz"
    tr.save(path)
    return Trace.load(path)


def test_grid_matches_trace(saved_trace):
    g = Grid.of(saved_trace)
    assert g.state.shape == (len(saved_trace.records), g.end - g.P)
    final = np.array(saved_trace.meta.final_tokens[g.P:g.end])
    assert np.array_equal(g.tokens[-1], final)
    assert (g.state[-1] != MASKED).all()
    # every position is committed exactly once, and NEW marks exactly the committed cells
    assert (g.committed.sum(0) == 1).all()
    assert np.array_equal(g.state == NEW, g.committed)
    assert g.block_edges() == [p - g.P for p in range((g.P // 4 + 1) * 4, g.end, 4)]


def test_views_render(saved_trace):
    g = Grid.of(saved_trace)
    html_last = render_text(saved_trace, None, g)
    html_first = render_text(saved_trace, 0, g)
    assert html_last.count("um-mask") == 0 and html_first.count("um-mask") > 0
    assert f"step 1 / {g.n_steps}" in html_first
    fig = heatmaps.mask_state(saved_trace, 2, g)
    assert fig.data[0].z.shape == g.state.shape
    # step index 2 is step 3 on the slider: the line runs along the lower edge of its row
    assert [s.y0 for s in fig.layout.shapes if s.name == "cursor-edge"] == [3.5]
    assert sum(1 for s in fig.layout.shapes if s.x0 == s.x1 and not s.name) == len(g.block_edges())
    conf = heatmaps.confidence(saved_trace, None, g)
    z = np.array(conf.data[0].z)
    assert z.dtype == np.uint8 and (z == heatmaps.NO_VALUE).any() and z[z != heatmaps.NO_VALUE].max() <= 100
    live = ~np.isnan(g.confidence)
    assert np.array_equal(z[live], np.rint(g.confidence[live] * 100).astype(np.uint8))
    assert len(conf.data[0].x) == len(g.positions) and conf.data[0].x[0].startswith(f"{g.P} ")
    out = render_summary(saved_trace, "away not after home")     # the checker in plain words, its own in the hover
    assert "TPF" in out and ">the places break the story&#x27;s order rule<" in out and "away not after home" in out
    assert "checker" not in render_summary(saved_trace)
    assert conf.data[0].text is None                     # the per-cell hover lives on the mask map, sent once
    hover = heatmaps.mask_state(saved_trace, 2, g).data[0].text
    s, j = np.argwhere(live)[0]
    assert hover[s][j] == f"candidate {saved_trace.token_str(g.candidate[s, j])} · p {g.confidence[s, j]:.2f}" + (
        " · committed" if g.committed[s, j] else "")


def test_explorer_does_not_import_torch():
    code = ("import sys; import explorer.layout, explorer.views.heatmaps, explorer.views.text, explorer.grid; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.fixture(scope="module")
def s2d2_trace(adapter, tmp_path_factory):
    tr = Generation(adapter, "Paul has 15 cards . He buys 6 more cards . How many cards does he have now ?",
                    build_decoder("s2d2", router="ucb", block_size=4, gen_length=16, stop_at_eos=False,
                                  temperature=1.0, seed=3)).run()
    path = tmp_path_factory.mktemp("s2") / "trace.npz"
    tr.save(path)
    return Trace.load(path)


def test_s2d2_views_render_from_saved_trace(s2d2_trace):
    from explorer.views.attention import attention_mask
    from explorer.views.router import router_timeline
    from explorer.views.verifier import ACCEPTED, FALLBACK, NONE, RESAMPLED, verifier_grid, verifier_map

    g = Grid.of(s2d2_trace)
    code, p, q, ratio, draft = verifier_grid(s2d2_trace, g)
    verify_rows = [s for s, r in enumerate(s2d2_trace.records) if r.kind == "verify"]
    assert verify_rows, "UCB explores verify at least once"
    # every committed cell in a verify row is accepted, resampled or a fallback commit
    for s in verify_rows:
        assert set(np.unique(code[s][g.committed[s]])) <= {ACCEPTED, RESAMPLED, FALLBACK}
        assert (~np.isnan(ratio[s][code[s] == ACCEPTED])).all()
    assert (code[~g.committed] != ACCEPTED).all() and (code[g.committed] != NONE).all()
    vm = verifier_map(s2d2_trace, 1, g)
    assert sum(len(d.y) for d in vm.data) == int((code > 0).sum())
    rt = router_timeline(s2d2_trace, 2)
    n_drafts = sum(r.kind == "draft" for r in s2d2_trace.records)
    assert len(rt.data[0].x) == n_drafts
    am = attention_mask(s2d2_trace, verify_rows[0])
    z = np.array(am.data[0].z)
    L = len(s2d2_trace.records[verify_rows[0]].positions)
    assert z.shape == (2 * L, 2 * L) and z[L:, L:].tolist() == np.eye(L, dtype=int).tolist()
    assert "verify" in am.layout.title.text


def test_tspd_and_reason_views(adapter):
    from explorer.views.ce_maps import ce_maps
    from explorer.views.reasons import reason_map
    from explorer.views.trajectory import default_positions, trajectories

    tr = Generation(adapter, "Noah has 50 coins . He loses 20 of them . How many coins are there now ?",
                    build_decoder("tspd", controller="heuristic", block_size=8, gen_length=16)).run()
    tr = Trace.from_bytes(tr.to_bytes())
    g = Grid.of(tr)
    rm = reason_map(tr, 1, g)
    assert sum(len(d.x) for d in rm.data) == int(g.committed.sum())
    pos = default_positions(tr, g, 0)
    fig = trajectories(tr, 0, g, pos[0])
    assert fig.data[0].name == f"pos {pos[0]}"
    rec = tr.records[0]
    masked = int(rec.positions[np.flatnonzero(rec.tokens_before == tr.meta.mask_token_id)[0]])
    fan = trajectories(tr, 0, g, masked)            # a masked position has a forecast, drawn as a filled fan
    assert np.isfinite(rec.field("forecast_mean")[list(rec.positions).index(masked)]).all()
    assert any(d.fill == "toself" for d in fan.data)
    cm = ce_maps(tr, 0, g)
    assert cm.data[0].z.shape == g.state.shape and [d.type for d in cm.data] == ["heatmap"] * 3 + ["scatter"]
    assert cm.data[3].marker.showscale and cm.data[3].marker.colorbar.title.text == "LCB as p"   # its colour bar


def test_candidates_view_and_notes(saved_trace):
    import importlib
    import pkgutil

    import explorer.views
    from explorer.glossary import how_to_read
    from explorer.views.candidates import candidates

    g = Grid.of(saved_trace)
    pos = int(g.positions[0])
    html_view = candidates(saved_trace, 0, g, pos)
    assert html_view.count("um-cand-row") == 5 and f"position {pos}" in html_view
    r = saved_trace.records[0]
    assert (np.diff(r.extra["topk_p"], axis=1) <= 0).all()                 # sorted, most likely first
    assert np.array_equal(r.extra["topk_ids"][:, 0], r.candidate)           # greedy: the candidate is the top-1
    assert "not been scored" in candidates(saved_trace, 0, g, int(g.positions[-1]))
    committed_now = g.commit_step[0] == 0
    assert ("committed at step 1" in html_view) == committed_now and ("still masked" in html_view) != committed_now
    for m in pkgutil.iter_modules(explorer.views.__path__):
        mod = importlib.import_module(f"explorer.views.{m.name}")
        assert how_to_read(mod), f"{m.name} has no 'How to read' paragraph"


def test_prophets_figure_marks_the_exit_where_the_gap_cleared_the_bar_and_whole_blocks_apart():
    """One diamond, at the forward whose gap cleared its bar (the rule's exit), and a square for each later forward,
    which commits a whole block whatever its gap; the title says both (the diamonds stood under the bar at steps
    2-5, as if the rule had exited there)."""
    from pathlib import Path
    from engine.decoders.prophet.card import ProphetFields
    from engine.records.trace import own_records
    from explorer.views.rivals import early_title, prophet_gap
    tr = Trace.load(Path(__file__).resolve().parent.parent / "assets" / "examples" / "prophet.npz")
    rows = {s + 1: f for s, _, f in own_records(tr, ProphetFields)}
    done = [s for s, f in rows.items() if f.exited]
    fig = prophet_gap(tr)
    (exit_mark,) = [t for t in fig.data if t.name and t.name.startswith("exit")]
    (whole,) = [t for t in fig.data if t.name and "committed whole" in t.name]
    assert list(exit_mark.x) == done[:1] and list(whole.x) == done[1:] and len(done) > 1
    assert all(rows[s].prophet_gap >= rows[s].prophet_bar for s in exit_mark.x)       # the rule's own exit
    assert any(rows[s].prophet_gap < rows[s].prophet_bar for s in whole.x)            # what a diamond misread
    assert fig.layout.title.text == early_title(done[0], len(done) - 1)
    assert early_title(1, 6) == "Prophet: the gap cleared its bar at step 1; then 6 blocks committed whole, a " \
        "forward each" and early_title(4, 0) == "Prophet: the gap cleared its bar at step 4"
