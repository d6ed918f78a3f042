"""Pure pieces of the explorer: URL state, export, sweep/Pareto, A/B summary, the mask explorer."""

import csv
import io
import json

import numpy as np
import pytest

from engine.models import masks
from engine.decoders import build_decoder
from engine.runtime.loop import Generation
from explorer.export import to_csv, to_json
from explorer.state import parse_query, to_query
from explorer.views.compare import compare_summary
from explorer.views.mask_explorer import KINDS, mask_explorer, mask_matrix
from explorer.views.sweep import pareto, sweep_figure


def test_query_roundtrip_and_bad_values():
    values = {"decoder": "s2d2", "tau": 0.85, "block_size": 4, "draft_ver": True, "router": "ucb", "prompt": "a b?"}
    back, problems = parse_query(dict(__import__("urllib.parse").parse.parse_qsl(to_query(values))))
    assert back == values and not problems
    got, problems = parse_query({"tau": "7", "block_size": "abc", "router": "nope", "bogus": "1", "ce": "maybe",
                                 "seed": "1e400", "beta": "nan", "gen_length": "inf"})
    assert got == {"tau": 1.0}                      # clamped to the page range, and said so
    assert len(problems) == 8 and "tau='7' is outside" in problems[0]
    # a value out of the page range is clamped and listed with the value used, not clamped in silence
    assert parse_query({"block_size": "999"}) == ({"block_size": 32}, [
        "block_size='999' is outside 1..32 on this page: 32 used"])
    assert parse_query({"block_size": "32", "tau": "1"}) == ({"block_size": 32, "tau": 1.0}, [])
    assert parse_query({"block": "4"})[0] == {"block_size": 4}     # links made before the catalogue
    # gradio's own parameters pass through without a word: its theme and its API page (?view=api)
    assert parse_query({"view": "api", "__theme": "dark", "tau": "0.5"}) == ({"tau": 0.5}, [])


def test_exports(adapter):
    tr = Generation(adapter, "Jack has 8 pens . How many pens are there now ?",
                    build_decoder("s2d2", router="always", block_size=4, gen_length=8)).run()
    d = json.loads(to_json(tr))
    assert d["meta"]["nfe"] == tr.nfe and len(d["steps"]) == len(tr.records)
    assert any("router" in s for s in d["steps"])
    rows = list(csv.DictReader(io.StringIO(to_csv(tr))))
    start = tr.meta.prompt_len
    assert any((r.positions < start).any() for r in tr.records)      # the first block scored prompt slots too
    assert len(rows) == sum(int((r.positions >= start).sum()) for r in tr.records)
    assert min(int(r["position"]) for r in rows) >= start           # no "draft" row of the prompt's own slots
    assert sum(int(r["committed"]) for r in rows) == sum(r.n_committed for r in tr.records)


def test_pareto_and_sweep_figure():
    x = np.array([1.0, 2.0, 3.0, 2.5, 1.5])
    y = np.array([0.9, 0.8, 0.5, 0.4, 0.95])
    assert pareto(x, y).tolist() == [4, 1, 2]
    rows = [dict(spec=f"s{i}", accuracy=float(a), tpf=float(t), tokens_per_s=10 * float(t), nfe=1.0, n=10)
            for i, (t, a) in enumerate(zip(x, y))]
    fig = sweep_figure(rows)
    assert len(fig.data) == 4 and list(fig.data[1].x) == [1.5, 2.0, 3.0]


def test_sweep_draws_one_front_per_decoder_and_tspd_vs_threshold_specs():
    from explorer.page.sweep import sweep_specs
    specs = sweep_specs("tspd vs threshold", "0.9,0.99", "16", "")
    assert specs[0] == "ar"             # the AR baseline, the quality bar of every sweep
    specs = specs[1:]
    assert specs == ["threshold:tau=0.9,block_size=16", "threshold:tau=0.99,block_size=16",
                     "tspd:tau_s=0.9,block_size=16", "tspd:tau_s=0.99,block_size=16"]
    rows = [dict(spec=s, decoder=s.split(":")[0], accuracy=a, tpf=t, tokens_per_s=t, nfe=1.0, n=20)
            for s, a, t in zip(specs, (0.9, 1.0, 0.95, 1.0), (6.0, 4.0, 6.5, 4.5))]
    fig = sweep_figure(rows)
    fronts = [tr for tr in fig.data if tr.mode == "lines" and tr.xaxis == "x"]
    assert [tr.name for tr in fronts] == ["threshold Pareto frontier", "tspd Pareto frontier"]
    assert list(fronts[1].x) == [4.5, 6.5] and fronts[0].line.color != fronts[1].line.color


def test_sweep_rivals_preset_puts_tspd_beside_each_rival_at_every_block_size():
    from engine.decoders import parse_spec
    from explorer.page.sweep import sweep_specs
    specs = sweep_specs("tspd vs rivals", "0.9", "8,16", "", 1.0)
    assert specs[0] == "ar:temperature=1" and len(specs) == 11
    names = [parse_spec(s) for s in specs[1:]]
    assert [n for n, _ in names[:5]] == ["threshold", "tspd", "prophet", "klass", "credit"]
    assert {p["block_size"] for _, p in names} == {"8", "16"} and all(p["temperature"] == "1" for _, p in names)


def test_compare_summary(adapter):
    p = "Mia has 12 toys . She gets 5 more toys . How many toys does she have now ?"
    a = Generation(adapter, p, build_decoder("ar", gen_length=8)).run()
    b = Generation(adapter, p, build_decoder("threshold", tau=0.5, block_size=8, gen_length=8)).run()
    html = compare_summary(a, b, "valid", "wrong answer")
    assert f"{b.tpf / a.tpf:.2f}×" in html and f"{b.nfe / a.nfe:.2f}×" in html
    assert "<td>right</td><td>wrong answer</td>" in html
    assert "checker" not in compare_summary(a, b)


@pytest.mark.parametrize("kind", KINDS)
def test_mask_explorer_uses_engine_masks(kind):
    m, rows, cols = mask_matrix(kind, 4, 1)
    fig = mask_explorer(kind, 4, 1, 2)
    assert np.array_equal(np.array(fig.data[0].z), m.astype(np.uint8)) and len(rows) == m.shape[0]
    if kind == "2L verifier":
        assert np.array_equal(m, masks.verifier_2l(0, 4))


def test_previous_delta(adapter):
    from explorer.views.summary import previous_delta

    p = "Leo has 4 coins . How many coins are there now ?"
    a = Generation(adapter, p, build_decoder("ar", gen_length=8)).run()
    b = Generation(adapter, p, build_decoder("threshold", tau=0.5, block_size=8, gen_length=8)).run()
    line = previous_delta(b, a)
    assert f"NFE {a.nfe} → {b.nfe}" in line and "ar" in line


def test_sweep_points_carry_wilson_bars_labels_and_the_table_intervals():
    from engine.harness.stats import wilson
    from explorer.views.sweep import sweep_figure, sweep_table
    rows = [dict(spec="ar", decoder="ar", accuracy=1.0, tpf=1.0, tokens_per_s=100.0, nfe=20.0, n=50, n_prompts=50,
                 accuracy_ci95=list(wilson(50, 50))),
            dict(spec="threshold:tau=0.9,block_size=8", decoder="threshold", accuracy=0.8, tpf=3.0,
                 tokens_per_s=300.0, nfe=7.0, n=50, n_prompts=48)]          # stored row without its interval
    fig = sweep_figure(rows)
    thr = next(t for t in fig.data if t.name == "threshold" and t.mode == "markers+text")
    lo, hi = wilson(40, 50)
    assert thr.error_y.array[0] == pytest.approx(hi - 0.8) and thr.error_y.arrayminus[0] == pytest.approx(0.8 - lo)
    assert list(thr.text) == ["τ 0.9 B 8"]
    assert not any(t.mode == "lines" and t.name.startswith("ar") for t in fig.data)   # AR is a point, no front
    table = sweep_table(rows)
    assert "0.800 [0.670, 0.888]" in table and "48 distinct" not in table and "50 distinct prompts" in table
    assert "<div class='um-scroll-x'><table" in table       # a phone scrolls it sideways (assets/style.css)
    rows[1].update(n=30, stopped_early=True)                 # the budget stopped this setting first
    table = sweep_table(rows)
    assert "<td>30*</td>" in table and "<td>50</td>" in table and "have fewer (n)" in table


def test_offered_models_get_short_names_and_resolve(sdar_dir):
    """A model offered by path appears by its directory's name (never the server's path), and the service loads
    it by that name."""
    from engine.harness.service import DecodeService
    from explorer.page.context import offered_names
    names = offered_names([str(sdar_dir), "org/model-x", str(sdar_dir)])
    assert names == {sdar_dir.name: str(sdar_dir), "org/model-x": "org/model-x", f"{sdar_dir.name}-2": str(sdar_dir)}
    svc = DecodeService(default_model=sdar_dir.name, aliases=names)
    assert svc.model_info()["family"] == "sdar" and "/" not in svc.model_info()["name"]


def test_model_card_names_drafter_tasks_and_decoders():
    from explorer.page.controls import model_summary
    from engine.tasks import Problem
    info = dict(family="sdar", params=3_500_000, device="cpu", dtype="float32", attention="block_causal",
                block_size=4, drafter="unmask-tasks-drafter", decoders={"threshold": None, "simsd": None,
                                                                         "llada": "needs X"})
    card = model_summary(info, [("Tell a story about a yak.", Problem("p", "", None, task="story")),
                                ("Ann has 3 pens.", Problem("q", "", None, task="arith"))])
    assert "trained with block size 4" in card and "unmask-tasks-drafter" in card
    assert "*story* — “Tell a story about a yak.”" in card and "*arith*" in card and "~~llada~~ (needs X)" in card


def test_the_tours_change_of_mind_is_an_edit_that_repairs_a_story():
    """The "change of mind" stop shows the pre-baked edit example at the step where a written token was rewritten,
    and that the rewrite is what made the checker's verdict right."""
    from pathlib import Path
    from engine.records.trace import Trace
    from engine.tasks import get_task
    from explorer.grid import Grid
    from explorer.page.context import Page
    from explorer.page.tour import TOUR, tour_next
    examples = Path(__file__).resolve().parent.parent / "assets" / "examples"
    page = Page(None, {}, example_traces={n: Trace.load(examples / f"{n}.npz") for n in ("s2d2", "edit")})
    at = [t for t, _ in TOUR].index("A change of mind")
    i, text, ex, s, tab = tour_next(page, at - 1)
    assert i == at and "change of mind" in text.lower() and ex.meta.decoder == "edit" and tab == "Decode"
    step, j, code, old, new = Grid.of(ex).revisions[0]
    old, new = ex.token_str(old), ex.token_str(new)
    assert s == step + 1 and code == 1 and f"<i>{old}</i>" in text and f"<i>{new}</i>" in text   # the card names them
    story = get_task("story")
    prob = next(q for q in story.problems("test", 10, seed=0) if ex.meta.prompt.rstrip(".") in q.prompt)
    assert story.verdict(ex.meta.text, prob) == "valid"
    words = ex.meta.text.split(" ")                    # the answer with the revised word put back is wrong
    k = [i for i, w in enumerate(words) if w.strip(".") == new]
    assert any(story.verdict(" ".join(words[:i] + [words[i].replace(new, old)] + words[i + 1:]), prob) != "valid"
               for i in k)


def test_opening_a_finished_runs_tab_leaves_its_server_views_to_the_scrubber():
    """The scrubber draws those at its step and selected position; a tab-open draw without the position could
    land after it and overwrite it."""
    from pathlib import Path

    import gradio as gr
    from engine.records.trace import Trace
    from explorer.page import decode_tab
    from explorer.registry import in_tab
    tr = Trace.load(Path(__file__).resolve().parent.parent / "assets" / "examples" / "edit.npz")
    with gr.Blocks():
        v = decode_tab.build_view_tabs(gr.HTML(), gr.HTML(), gr.HTML())
    out = decode_tab.tab_opened(v, "Revisions", {"drawn": (tr.meta.run_id, set())}, tr)
    drawn = {name for name, plot in v.plots.items() if plot in out}
    assert drawn == {x.name for x in in_tab("Revisions") if x.scrub != "server"} and drawn
    assert {"history", "eb"}.isdisjoint(drawn)


# the tabs each pre-baked example shows: the core tabs by their rules, a decoder's tab from its card's fields, and
# the canvas hiding the mask-slot tabs (engine.catalogue.cards.Card.hides)
EXAMPLE_TABS = {"ar": [], "llada": [], "threshold": [], "branch_edit": [], "eb": ["Revisions"],
                "edit": ["Revisions"], "remdm": ["Revisions"], "wino": ["Revisions"], "s2d2": ["S2D2"],
                "s2d2_picks": ["S2D2"], "simsd": ["S2D2", "SimSD"], "tspd": ["TSPD + CE"], "credit": ["Credit"],
                "klass": ["KLASS"], "prophet": ["Prophet"], "parallel_copy": [], "parallel_shuffle": []}


def test_each_example_shows_the_tabs_its_cards_declare():
    from pathlib import Path

    from engine.records.trace import Trace
    from explorer import registry
    root = Path(__file__).resolve().parents[1] / "assets" / "examples"
    for name, tabs in EXAMPLE_TABS.items():
        assert registry.tabs_shown(Trace.load(root / f"{name}.npz")) == ["Decode", *tabs], name
    assert registry.tabs_shown(Trace.load(root / "uniform.npz")) == ["Canvas"]
    assert registry.TABS[0] == "Decode" and registry.TABS[-1] == "KV cache"
    assert {"verifier", "router", "attn"} == registry.names_in("S2D2")    # S2D2's card brings its three views


def test_a_decoders_own_summary_cards_come_from_its_card():
    """SimSD's card adds its target-equivalent NFE and what it means; another decoder's run has neither."""
    from pathlib import Path

    from engine.decoders.simsd.card import SimSDSummary
    from engine.records.trace import Trace
    from explorer.views.summary import render_summary
    root = Path(__file__).resolve().parents[1] / "assets" / "examples"
    simsd, other = Trace.load(root / "simsd.npz"), Trace.load(root / "threshold.npz")
    html = render_summary(simsd)
    assert f"{simsd.meta.own(SimSDSummary).target_equiv_nfe:.1f}" in html     # a pre-baked trace, saved flat and "target-equiv. NFE" in html
    assert "SimSD runs two models" in html
    assert "target-equiv" not in render_summary(other) and "SimSD" not in render_summary(other)


@pytest.mark.parametrize("bad", [["tspd"], None, 3, "nope"])
def test_a_sweep_of_an_unknown_grid_is_a_one_line_error(bad):
    from engine.errors import UserError
    from explorer.page.sweep import sweep_specs
    with pytest.raises(UserError, match="decoder must be one of"):
        sweep_specs(bad, "0.9", "8", "")


@pytest.mark.parametrize("taus,blocks", [("٠.٨", "8"), ("0.9", "８"), ("0.9", "1_6"), ("0.9", "٨")])
def test_the_sweeps_numbers_take_ascii_digits_only(taus, blocks):
    """Issue 65: float() and int() read Arabic-Indic and full-width digits (and underscores); the Sweep's fields,
    as every parameter, refuse them with one line."""
    from engine.errors import UserError
    from explorer.page.sweep import sweep_specs
    with pytest.raises(UserError, match="comma-separated numbers"):
        sweep_specs("threshold", taus, blocks, "")
    assert sweep_specs("threshold", "0.5, .9", "4,16", "")[1:] != []


def test_compares_defaults_are_settings_that_apply_to_the_chosen_model():
    from types import SimpleNamespace
    from explorer.page.compare import compare_defaults
    applies = lambda *ok: {"decoders": {d: None if d in ok else "no" for d in ("threshold", "s2d2", "llada", "uniform")}}  # noqa
    page = SimpleNamespace(model_infos={"sdar": applies("threshold", "s2d2", "llada"), "llada": applies("threshold", "llada"),
                                        "gemma": applies("uniform")})
    assert compare_defaults(page, "sdar") == ("threshold:tau=0.9,block_size=8", "s2d2:preset=sdar-a")
    assert compare_defaults(page, "llada") == ("threshold:tau=0.9,block_size=8", "llada:block_size=8,steps=8")
    assert compare_defaults(page, "gemma") == ("uniform", "uniform:entropy_bound=0.5")
    # a model picked with a run shown on it (a tour stop, a link): A is left to follow that run (or to hold what the
    # visitor typed); picked without one, A too is the model's pair's, which applies to it
    import gradio as gr
    from explorer.page.compare import model_defaults
    shown = SimpleNamespace(meta=SimpleNamespace(model="gemma"))
    a, b = model_defaults(page, "gemma", shown)
    assert a == gr.skip() and b == "uniform:entropy_bound=0.5"
    assert model_defaults(page, "llada", shown) == compare_defaults(page, "llada")
    assert model_defaults(page, "llada", None) == compare_defaults(page, "llada")


def test_a_visitors_model_switch_brings_that_models_example_unless_the_prompt_is_their_own():
    from types import SimpleNamespace
    from explorer.page.controls import prompt_for_model
    page = SimpleNamespace(examples={"tasks": [("Tell a story about a yak.", None), ("3 + 4 =", None)],
                                     "parallel": [("copy: pam bob", None)], "bare": []})
    assert prompt_for_model(page, "parallel", "Tell a story about a yak.") == "copy: pam bob"
    assert prompt_for_model(page, "parallel", "") == "copy: pam bob"
    for kept in (("tasks", "3 + 4 ="), ("parallel", "my own words"), ("bare", "3 + 4 ="), (None, "3 + 4 =")):
        assert not isinstance(prompt_for_model(page, *kept), str), kept     # the prompt stays (gr.skip)


def test_sweep_labels_fit_name_only_what_differs_and_are_never_cut():
    from explorer.views.sweep import short_label, sweep_figure
    assert short_label("ar:temperature=1") == "AR"
    assert short_label("threshold:tau=0.5,block_size=8,temperature=1") == "τ 0.5 B 8"
    # three frontier points within a hair of each other, one far: the crowded ones keep one label between them
    rows = [dict(spec="ar:temperature=1", decoder="ar", accuracy=0.9, tpf=1.0, tokens_per_s=50.0, nfe=20.0, n=50)] + [
        dict(spec=f"threshold:tau={t},block_size=8,temperature=1", decoder="threshold", accuracy=a, tpf=x,
             tokens_per_s=50 * x, nfe=5.0, n=50)
        for t, a, x in ((0.9, 0.900, 3.00), (0.8, 0.897, 3.05), (0.7, 0.894, 3.10), (0.3, 0.60, 6.0))]
    fig = sweep_figure(rows)
    thr = next(t for t in fig.data if t.name == "threshold" and t.mode == "markers+text" and t.xaxis == "x")
    labelled = [t for t in thr.text if t]
    assert labelled == ["τ 0.9 B 8", "τ 0.3 B 8"] and thr.cliponaxis is False, list(thr.text)
    assert not any("temperature" in str(t.text) for t in fig.data if t.text is not None)


def test_the_tour_ends_on_its_last_stop():
    """Next on the last stop stays there (it wrapped to stop 1) and says so; Back does nothing on the first."""
    from pathlib import Path
    from engine.records.trace import Trace
    from explorer.page.context import Page
    from explorer.page.tour import STOPS, buttons, tour_next
    examples = Path(__file__).resolve().parent.parent / "assets" / "examples"
    last = len(STOPS) - 1
    page = Page(None, {}, example_traces={STOPS[last].example: Trace.load(examples / f"{STOPS[last].example}.npz")})
    assert tour_next(page, last)[0] == last and tour_next(page, last - 1)[0] == last
    (back, nxt), (first_back, first_next) = buttons(last), buttons(0)
    assert nxt.interactive is False and "last" in nxt.value.lower() and back.interactive is True
    assert first_back.interactive is False and first_next.interactive is True


def test_compares_first_setting_decodes_the_run_shown_again():
    """Compare's A starts as the opening run's SPEC (its dials and seed): decoded, it writes the same text (it wrote
    another story: the temperature it left out)."""
    from pathlib import Path
    from engine.catalogue.spec import parse_spec
    from engine.harness.service import DecodeService
    from engine.records.trace import Trace
    from explorer.page.compare import spec_of
    ex = Trace.load(Path(__file__).resolve().parent.parent / "assets" / "examples" / "threshold.npz")
    name, params = parse_spec(spec_of(ex))
    again = DecodeService(default_model=ex.meta.model, max_seconds=60).run(ex.meta.prompt, name, params)
    assert name == ex.meta.decoder and "temperature=1.0" in spec_of(ex)
    assert again.meta.token_ids == ex.meta.token_ids and again.meta.text == ex.meta.text


def test_sweep_labels_of_two_decoders_never_overprint_and_the_speed_axis_says_wall_clock():
    """AR's label and a threshold point's beside it ("AR" ran into "τ 0.5 B 4" on the tokens/s panel): thinned
    together; the tokens/s axis says it is this machine's wall clock, TPF the papers' measure."""
    from explorer.views.sweep import sweep_figure
    rows = [dict(spec="ar:temperature=1", decoder="ar", accuracy=0.90, tpf=1.0, tokens_per_s=50.0, nfe=20.0, n=50),
            dict(spec="threshold:tau=0.5,block_size=4", decoder="threshold", accuracy=0.895, tpf=3.0,
                 tokens_per_s=50.5, nfe=5.0, n=50),
            dict(spec="threshold:tau=0.9,block_size=4", decoder="threshold", accuracy=0.6, tpf=1.5,
                 tokens_per_s=20.0, nfe=9.0, n=50)]
    fig = sweep_figure(rows)
    on_speed = [t for t in fig.data if t.mode == "markers+text" and t.xaxis == "x2"]
    texts = [s for t in on_speed for s in t.text if s]
    assert "AR" in texts and "τ 0.5 B 4" not in texts, texts          # the two points are a hair apart there
    assert "τ 0.5 B 4" in [s for t in fig.data if t.mode == "markers+text" and t.xaxis == "x" for s in t.text]
    assert "wall clock" in fig.layout.xaxis2.title.text and "papers" in fig.layout.xaxis.title.text
