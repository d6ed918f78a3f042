"""The TSPD-vs-threshold Pareto tool: its front, its targets, its figure and its look-ahead bookkeeping."""

from xml.etree import ElementTree

import numpy as np

from tools.experiments.pareto import LookaheadTally, pareto_front, targets
from tools.experiments.svg import scatter_svg


def test_pareto_front_keeps_only_undominated_points():
    pts = [(0.2, 0.9), (0.3, 0.95), (0.25, 0.85), (0.4, 0.95), (0.1, 0.5)]
    assert pareto_front(pts) == [0, 1, 4]


def row(spec, acc, nfe, nfe_per_token):
    return dict(spec=spec, decoder=spec.split(":")[0], accuracy=acc, nfe=nfe, nfe_per_token=nfe_per_token)


def test_targets_compare_the_cheapest_points_at_ar_quality():
    rows = [row("ar", 1.0, 22, 1.0), row("llada:block_size=16,steps=16", 0.99, 31, 1.4),
            row("tspd:block_size=16", 0.99, 4.0, 0.18), row("tspd:block_size=16,tau_s=0.5", 0.95, 3.0, 0.14),
            row("threshold:tau=0.99,block_size=16", 1.0, 4.9, 0.225), row("threshold:tau=0.9,block_size=16", 0.95, 3.8, 0.17)]
    t = targets(rows, 16)
    assert t["default_vs_llada"]["met"] and abs(t["default_vs_llada"]["nfe_ratio"] - 31 / 4) < 1e-9
    at = t["at_ar_quality"]
    assert at["best_threshold"] == "threshold:tau=0.99,block_size=16" and at["best_tspd"] == "tspd:block_size=16"
    assert abs(at["nfe_per_token_ratio"] - 0.18 / 0.225) < 1e-9 and at["met"] and not at["tspd_only"]
    top = t["at_threshold_best"]
    assert top["accuracy"] == 1.0 and top["threshold"] == "threshold:tau=0.99,block_size=16" and top["tspd"] is None
    rows[4]["accuracy"] = 0.98                                 # no τ reaches AR's bar; TSPD does
    t = targets(rows, 16)
    assert t["at_ar_quality"]["tspd_only"] and not t["at_ar_quality"]["met"]
    assert t["at_threshold_best"]["tspd"] == "tspd:block_size=16"
    assert abs(t["at_threshold_best"]["nfe_per_token_ratio"] - 0.18 / 0.225) < 1e-9
    rows[4]["accuracy"] = 1.0
    rows[2]["accuracy"] = 0.97                                 # 2 points below LLaDA: both targets missed
    t = targets(rows, 16)
    assert not t["default_vs_llada"]["met"] and t["at_ar_quality"]["best_tspd"] is None and not t["at_ar_quality"]["met"]


def test_scatter_svg_draws_every_point_and_escapes_labels():
    svg = scatter_svg({"threshold": [(0.2, 0.9, "a<b"), (0.3, 0.95, "c")], "tspd": [(0.18, 0.95, "d")], "ar": []},
                      fronts={"threshold": ["a<b", "c"], "tspd": ["d"]}, x_label="NFE per token", y_label="accuracy",
                      title="t & u")
    root = ElementTree.fromstring(svg)                         # well-formed XML: labels were escaped
    ns = "{http://www.w3.org/2000/svg}"
    titles = [t.text for t in root.iter(f"{ns}title")]
    assert len(titles) == 3 and titles[0].startswith("a<b") and len(list(root.iter(f"{ns}polyline"))) == 2


def test_lookahead_counts_come_from_the_bench_own_traces(adapter, monkeypatch):
    """Each (setting, problem) is decoded once: the look-ahead counts read the bench's traces, and the reference
    is the bench's own LLaDA row."""
    from engine.runtime import loop
    from engine.harness.bench import run_bench
    from tools.training.collect import lookahead_counts
    calls = []
    real = loop.Generation.requests
    monkeypatch.setattr(loop.Generation, "requests", lambda self: calls.append(1) or real(self))
    ref = "llada:block_size=8,steps=8,gen_length=16"
    specs = [ref, "tspd:block_size=8,controller=heuristic,kappa=0.0,s_min=1,gen_length=16,tau=0.5",
             "tspd:block_size=8,controller=heuristic,ce=0,gen_length=16"]
    tally, traces = LookaheadTally(ref), []
    run_bench(adapter, "arith", 3, specs, on_trace=lambda *a: (traces.append(a), tally(*a)))
    assert len(calls) == 1 + 3 * len(specs)                               # the warm-up, then each decode once
    st = tally.stats()
    assert set(st) == set(specs[1:]) and st[specs[2]]["lookahead_commits"] == 0 and st[specs[2]]["contradicted"] is None
    finals = {i: tr.meta.final_tokens for s, i, _, tr in traces if s == ref}
    by_hand = np.sum([lookahead_counts(tr, finals[i]) for s, i, _, tr in traces if s == specs[1]], axis=0)
    assert st[specs[1]]["lookahead_commits"] == by_hand[1]
    assert st[specs[1]]["lookahead_share"] == by_hand[1] / max(1, by_hand[0])
