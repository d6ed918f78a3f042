"""The line under the view tabs (``explorer.page.more_views``): every tab a run may leave out, with the
decoders that fill it, each linked on a model that takes it (its browser half: ``tests/test_browser_busy.py``)."""

from __future__ import annotations


def test_the_views_line_names_every_tab_a_run_leaves_out_with_a_link_to_a_run_that_fills_it():
    """Each tab but Decode is named with the decoders that fill it, each linked on the first
    model that takes it (the uniform canvas on its own model); a decoder no model here takes has no link."""
    from explorer.page.more_views import more_views_html, tab_decoders
    from explorer.registry import TABS

    class Page:
        models = ("unmask-tasks-small", "unmask-uniform-small")
        model_infos = {"unmask-tasks-small": {"decoders": {d: None for d in ("edit", "wino", "s2d2", "tspd")}
                                              | {"uniform": "a canvas model", "dream": "full attention"}},
                       "unmask-uniform-small": {"decoders": {"uniform": None, "s2d2": "block causal"}}}

    got = more_views_html(Page())
    assert set(tab_decoders()) == set(TABS) - {"Decode"}
    for tab in set(TABS) - {"Decode"}:
        assert f"data-tab='{tab}'" in got.replace("&amp;", "&"), tab
    assert "href='?decoder=s2d2'" in got and "href='?decoder=uniform&amp;model=unmask-uniform-small'" in got
    assert "decoder=dream" not in got and "decoder=klass" not in got         # no model offered takes them
