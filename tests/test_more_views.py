"""The line under the view tabs (``explorer.page.more_views``): every tab a run may leave out, with the
decoders that fill it, each linked to a run that fills it: the decoder's pre-baked setting (its model, prompt and
dials), read back by the page's own link parser, with the tab to open. Its browser half (the line under the strip,
three links followed to a live run): ``tests/test_browser_ux.py``."""

from __future__ import annotations

import html
import re
from pathlib import Path
from urllib.parse import parse_qsl

from engine.records.trace import Trace

EXAMPLES = Path(__file__).resolve().parent.parent / "assets" / "examples"
TASKS = ("edit", "wino", "remdm", "eb", "s2d2", "simsd", "tspd", "credit", "klass", "prophet")


class Page:
    models = ("unmask-tasks-small", "unmask-uniform-small")
    default_model = models[0]
    model_infos = {"unmask-tasks-small": {"decoders": {d: None for d in TASKS} | {"uniform": "a canvas model",
                                                                                   "dream": "full attention"}},
                   "unmask-uniform-small": {"decoders": {"uniform": None, "s2d2": "block causal"}}}
    example_traces = {p.stem: Trace.load(p) for p in sorted(EXAMPLES.glob("*.npz"))}


def test_every_link_is_a_setting_whose_run_fills_its_tab_and_opens_it():
    """Each tab but Decode is named; each link parses (no problem) to the decoder's pre-baked example's setting,
    whose run shows the tab: token editing's edits (Revisions), the canvas decodes arithmetic on the uniform model
    (the task it knows: a story prompt gave [PAD]s). A decoder no model here takes has no link."""
    from explorer.page.more_views import more_views_html, tab_decoders
    from explorer.registry import TABS, tabs_shown
    from explorer.state import parse_query
    page = Page()
    got = more_views_html(page)
    assert set(tab_decoders()) == set(TABS) - {"Decode"}
    links = re.findall(r"<li data-tab='([^']+)'>(.*?)</li>", got)
    assert {html.unescape(t) for t, _ in links} == set(TABS) - {"Decode"}
    followed = 0
    for tab, row in links:
        tab = html.unescape(tab)
        for href, decoder in re.findall(r"<a href='\?([^']+)' data-decoder='([^']+)'>", row):
            values, problems = parse_query(dict(parse_qsl(html.unescape(href))), page.models)
            assert problems == [] and values["tab"] == tab and values["decoder"] == decoder, (tab, values)
            # the example that fills the tab (token editing's branch of the opening story has its prompt too)
            example = next(t for t in page.example_traces.values() if t.meta.decoder == decoder
                           and t.meta.prompt == values["prompt"] and tab in tabs_shown(t))
            assert values.get("model", page.models[0]) == example.meta.model
            # every dial of the example (not only those off the decoder's defaults: the page's own may differ)
            dials = {k: v for k, v in example.meta.params.items() if v != ""}     # an empty preset: none
            assert {k: values.get(k) for k in dials} == dials, (tab, values)
            followed += 1
    assert followed == 11, followed            # 4 revising decoders, 6 decoders' own tabs, the canvas
    canvas = re.search(r"data-decoder='uniform'", got) and re.search(r"href='\?([^']+)' data-decoder='uniform'", got)
    query = dict(parse_qsl(html.unescape(canvas.group(1))))
    assert query["model"] == "unmask-uniform-small" and "stamps" in query["prompt"]    # arithmetic
    assert "decoder=dream" not in got and "decoder=klass" in got         # Dream: no model offered takes it


def test_a_tab_shows_only_the_views_the_run_fills():
    """An edit run's Revisions tab: its token history, not EB's, WINO's and Dream's placeholders; an EB run's: EB's
    view and the token history (a core view shows whenever its tab does)."""
    from explorer.registry import in_tab, views_shown
    shown = {v.name for v in views_shown(Page.example_traces["edit"])}
    assert "history" in shown and not shown & {"eb", "wino", "dream"}
    assert {v.name for v in in_tab("Revisions")} >= {"history", "eb", "wino", "dream"}
    assert {v.name for v in views_shown(Page.example_traces["eb"])} & {v.name for v in in_tab("Revisions")} == \
        {"eb", "history"}


def test_every_link_opens_a_held_out_problem_with_a_checker():
    """Each link's prompt is one of the held-out problems the page offers (the pre-baked examples are decoded on
    them, ``tools.experiments.bake_examples.offered``), so the run it opens has a checker tile: token editing's
    and SimSD's were a story the prompt menu does not offer, and showed none."""
    from explorer.page.context import Page as RealPage
    from explorer.page.examples import held_out
    from explorer.page.more_views import example_for, more_views_html
    from explorer.state import parse_query
    page = RealPage(service=None, examples={m: held_out("mix") for m in Page.models}, models=Page.models,
                    model_infos=Page.model_infos, example_traces=Page.example_traces)
    hrefs = re.findall(r"<a href='\?([^']+)' data-decoder='([^']+)'>", more_views_html(page))
    assert len(hrefs) == 11
    for href, decoder in hrefs:
        values, _ = parse_query(dict(parse_qsl(html.unescape(href))), page.models)
        example = example_for(page, values["tab"], decoder)
        assert example.meta.prompt == values["prompt"]
        assert page.problem(values["prompt"]) is not None, (decoder, values["prompt"])
        assert isinstance(page.verdict(example), str), decoder               # a checker tile: None is none
