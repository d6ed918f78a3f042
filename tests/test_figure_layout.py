"""No text of a figure runs into another (``tools.page.bench_figures``): the overlap rule on hand-built boxes, then
every view of every pre-baked example (every decoder's tab) drawn in Chromium at the figure widths of a 1500, a 780
and a 390 px window, titles and tick labels also checked for running past the figure's edges."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.page import bench_figures as bf


def box(group, x0, y0, x1, y1):
    return dict(group=group, text=group, corners=[[x0, y0], [x1, y0], [x1, y1], [x0, y1]])


def rotated(group, cx, cy, length=40.0, thick=10.0, deg=-60.0):
    """A label of the given size turned by ``deg`` about its centre, as Plotly turns tick labels."""
    import math
    a = math.radians(deg)
    u, v = (math.cos(a), math.sin(a)), (-math.sin(a), math.cos(a))
    return dict(group=group, text=group, corners=[[cx + su * u[0] * length / 2 + sv * v[0] * thick / 2,
                                                   cy + su * u[1] * length / 2 + sv * v[1] * thick / 2]
                                                  for su, sv in ((-1, -1), (1, -1), (1, 1), (-1, 1))])


def test_overlapping_boxes_of_two_labels_collide_and_touching_ones_do_not():
    assert bf.collisions([box("title 0", 0, 0, 50, 12), box("legend 0", 40, 5, 90, 17)])
    assert not bf.collisions([box("title 0", 0, 0, 50, 12), box("legend 0", 49, 0, 90, 12)])   # 1 px: slack
    assert not bf.collisions([box("title 0", 0, 0, 50, 12), box("title 0", 10, 0, 60, 12)])    # one label's parts


def test_turned_tick_labels_side_by_side_do_not_collide_though_their_upright_boxes_would():
    a, b = rotated("tick x", 100, 100), rotated("tick x", 118, 100)
    upright = [[min(c[0] for c in r["corners"]), max(c[0] for c in r["corners"])] for r in (a, b)]
    assert upright[0][1] > upright[1][0] + 5                  # the axis-aligned boxes overlap by far
    assert not bf.collisions([a, b])
    assert bf.collisions([a, rotated("tick x", 104, 100)])    # two labels on top of each other do


def test_the_overlap_depth_is_the_smallest_projection_overlap():
    assert bf.depth(box("a", 0, 0, 10, 10)["corners"], box("b", 7, 0, 20, 10)["corners"]) == pytest.approx(3)
    assert bf.depth(box("a", 0, 0, 10, 10)["corners"], box("b", 12, 0, 20, 10)["corners"]) < 0


def pairwise_depth(a: list, b: list) -> float:
    """The separating-axis overlap of two quadrilaterals, one pair at a time in plain Python (the reference)."""
    best = float("inf")
    for poly in (a, b):
        for (x0, y0), (x1, y1) in zip(poly, poly[1:] + poly[:1]):
            nx, ny = y0 - y1, x1 - x0
            norm = (nx * nx + ny * ny) ** 0.5 or 1.0
            pa, pb = [(x * nx + y * ny) / norm for x, y in a], [(x * nx + y * ny) / norm for x, y in b]
            best = min(best, min(max(pa), max(pb)) - max(min(pa), min(pb)))
    return best


def test_all_pairs_at_once_find_exactly_the_collisions_of_one_pair_at_a_time():
    """``collisions`` measures every pair of a figure at once (numpy): on seeded random labels, upright and turned,
    of one and of different groups, it finds the same pairs in the same order as the pairwise rule."""
    import random
    rng, found = random.Random(0), 0
    for _ in range(30):
        boxes = [rotated(rng.choice(["tick x", "tick y", "title 0", "legend 1"]), rng.uniform(0, 200),
                         rng.uniform(0, 200), rng.uniform(0, 60), rng.uniform(0, 14), rng.choice([0, -90, -60, 30]))
                 for _ in range(rng.randint(0, 60))]
        want = [(f"{a['group']}: {a['text']}", f"{b['group']}: {b['text']}")
                for i, a in enumerate(boxes) for b in boxes[i + 1:]
                if (a["group"] != b["group"] or a["group"].startswith("tick"))
                and pairwise_depth(a["corners"], b["corners"]) > bf.SLACK]
        assert bf.collisions(boxes) == want
        found += len(want)
        for a, b in zip(boxes, boxes[1:]):
            assert bf.depth(a["corners"], b["corners"]) == pytest.approx(pairwise_depth(a["corners"], b["corners"]))
    assert found > 100                       # not vacuous: many pairs collide, many more do not


@pytest.mark.browser
def test_no_figure_of_any_pre_baked_example_has_colliding_text():
    pytest.importorskip("playwright.sync_api")
    from tools.page.bench_ux import CHROMIUM
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium not installed")
    res = bf.measure()
    assert res["examples"] == len(list(bf.EXAMPLES.glob("*.npz"))) and res["figures"] > 150
    # 1500, 780 and 390 px windows: no text overlaps, no title or tick label cut at the figure's edges
    assert set(bf.WIDTHS) == {"desktop", "half", "phone"}
    assert all(res[k] == [] for k in bf.WIDTHS), {k: res[k][:3] for k in bf.WIDTHS}
