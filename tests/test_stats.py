"""engine.harness.stats against values computed by hand (and published tables)."""

import math

import pytest

from engine.harness import stats


@pytest.mark.parametrize("k,n,lo,hi", [
    (8, 10, 0.4902, 0.9433),        # Brown, Cai & DasGupta's worked example range; also R's prop.test(correct=F)
    (0, 10, 0.0, 0.2775),
    (10, 10, 0.7225, 1.0),
    (50, 100, 0.4038, 0.5962),
    (27, 27, 0.8754, 1.0),
])
def test_wilson_known_values(k, n, lo, hi):
    got = stats.wilson(k, n)
    assert got == pytest.approx((lo, hi), abs=1e-4)


def test_wilson_edges():
    assert stats.wilson(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        stats.wilson(3, 2)
    lo, hi = stats.wilson(1, 1000)
    assert 0 < lo < 0.001 < hi < 0.01


@pytest.mark.parametrize("b,c,p", [
    (1, 7, 2 * (1 + 8) / 256),      # 2 · P(X <= 1 | n = 8)
    (0, 5, 2 / 32),
    (0, 6, 2 / 64),
    (5, 5, 1.0),
    (0, 0, 1.0),
    (3, 12, 2 * sum(math.comb(15, i) for i in range(4)) / 2 ** 15),
])
def test_exact_mcnemar(b, c, p):
    assert stats.mcnemar(b, c) == pytest.approx(p)
    assert stats.mcnemar(c, b) == pytest.approx(p)


def test_compare_phrases_the_verdict():
    a = [True] * 10 + [False] * 2
    b = [False] * 8 + [True] * 2 + [False] * 2
    out = stats.compare("edit", a, "threshold", b)
    assert (out["a_only"], out["b_only"]) == (8, 0)
    assert out["p"] == pytest.approx(2 / 256) and out["significant"]
    assert out["verdict"].startswith("edit beats threshold")
    same = stats.compare("x", [True, False], "y", [False, True])
    assert "within noise" in same["verdict"] and not same["significant"]
    with pytest.raises(ValueError):
        stats.compare("x", [True], "y", [True, False])


def test_fmt_ci():
    assert stats.fmt_ci(0.5, (0.4038, 0.5962)) == "0.500 [0.404, 0.596]"
