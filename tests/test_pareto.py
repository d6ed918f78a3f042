"""The TSPD-vs-threshold Pareto tool: its front and its look-ahead bookkeeping, on a small model and a small run."""

from engine.experiments.pareto import lookahead_stats, pareto_front


def test_pareto_front_keeps_only_undominated_points():
    pts = [(0.2, 0.9), (0.3, 0.95), (0.25, 0.85), (0.4, 0.95), (0.1, 0.5)]
    assert pareto_front(pts) == [0, 1, 4]


def test_lookahead_stats_count_commits(adapter, arith):
    st = lookahead_stats(adapter, arith, 2, "tspd:block_size=8,controller=heuristic,kappa=0.0,s_min=1,gen_length=16", 8)
    assert 0.0 <= st["lookahead_share"] <= 1.0 and st["lookahead_commits"] >= 0
    assert st["contradicted"] is None or 0.0 <= st["contradicted"] <= 1.0
