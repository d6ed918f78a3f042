"""Prophet, KLASS and credit decoding on hand-computed cases and scripted logits: each rule as its reference
states it, with its edge cases (Prophet's phases and last block, KLASS's first forward, credit's decay and ties).

The scripted adapter gives a slot's candidate log c and each of the other 49 ids log((1 − c)/49): the raw softmax
is c, the top-2 logit gap is log(49 c / (1 − c)), and without [MASK] (which no decoder may commit) the candidate's
p is c / (1 − (1 − c)/49).
"""

import math

import numpy as np
import pytest
import torch

from engine.decoders import build_decoder
from engine.decoders.credit.policy import add_credit, credit_commit, fuse
from engine.decoders.klass.policy import kl_step, pick, ready_slots
from engine.decoders.prophet.policy import logit_gap, phase_bar
from engine.runtime.loop import Generation
from engine.records.trace import Reason
from explorer import registry
from tests.conftest import ScriptedAdapter
from engine.decoders.prophet.card import ProphetSummary

PROMPT = [1, 10, 11, 12, 13, 14, 15, 16]           # 8 tokens: the blocks after it are fully masked


def run(script, gen_length=8, **kw):
    cfg = dict(block_size=8, gen_length=gen_length, use_cache=False, stop_at_eos=False)
    return Generation(ScriptedAdapter(script), PROMPT, build_decoder(**cfg, **kw)).run()


def commits(trace) -> list[dict]:
    """Per record: {relative position: Reason} of what it committed."""
    return [{int(r.positions[j]) - 8: int(r.reason[j]) for j in np.flatnonzero(r.committed)} for r in trace.records]


def gap_of(c: float) -> float:
    return math.log(49 * c / (1 - c))


# ---- Prophet ----------------------------------------------------------------------------------------------
def test_prophet_bar_falls_with_progress_at_the_papers_bounds():
    assert [phase_bar(p, 7.5, 5.0, 2.5) for p in (0.0, 0.3299, 0.33, 0.6699, 0.67, 1.0)] == [7.5, 7.5, 5.0, 5.0,
                                                                                            2.5, 2.5]
    assert logit_gap(torch.tensor([[3.0, 1.0, 2.5], [0.0, 0.0, -1.0]])).tolist() == [0.5, 0.0]


def test_prophet_exits_in_the_mid_phase_then_commits_each_later_block_in_one_forward():
    # c = 0.5 (gap 3.89) for two forwards, then c = 0.9 (gap 6.09): 16 nominal forwards (8 steps × 2 blocks);
    # forwards 3–5 are early (bar 7.5: the quota), forward 6 is mid (bar 5.0 ≤ 6.09: the exit)
    tr = run(lambda t: [(20 + k, 0.5 if t < 2 else 0.9) for k in range(8)], gen_length=16, name="prophet")
    c = commits(tr)
    assert [len(s) for s in c] == [1, 1, 1, 1, 1, 3, 8]
    assert set(c[5].values()) == {Reason.PROPHET_EXIT} and set(c[6].values()) == {Reason.PROPHET_EXIT}
    assert all(set(s.values()) == {Reason.SCHEDULE} for s in c[:5])
    assert [r.field("prophet_bar") for r in tr.records] == [7.5] * 5 + [5.0, 5.0]     # forward 7: 7/16 < 0.67
    assert tr.records[5].field("prophet_gap") == pytest.approx(gap_of(0.9), abs=1e-5)
    assert [r.field("exited") for r in tr.records] == [False] * 5 + [True, True]
    assert tr.meta.own(ProphetSummary).exit_forward == 6


def test_prophet_in_its_last_block_commits_only_that_block_and_the_scale_moves_every_bar():
    tr = run(lambda t: [(20 + k, 0.5) for k in range(8)], gen_length=16, name="prophet")   # gap 3.89 throughout
    c = commits(tr)   # block 1 by the quota (bars 7.5, 5.0); block 2: forwards 9, 10 mid, 11 late: 3.89 ≥ 2.5
    assert [len(s) for s in c] == [1] * 10 + [6] and tr.meta.own(ProphetSummary).exit_forward == 11
    assert tr.records[-1].field("progress") == pytest.approx(11 / 16)
    scaled = run(lambda t: [(20 + k, 0.9) for k in range(8)], gen_length=16, name="prophet", gap_scale=2.0)
    assert scaled.meta.own(ProphetSummary).exit_forward == 11                     # bars 15, 10, 5: only the late one ≤ 6.09
    assert run(lambda t: [(20 + k, 0.5) for k in range(8)], gen_length=16, name="prophet",
               gap_scale=0.0).meta.own(ProphetSummary).exit_forward == 1         # every bar 0: the first forward commits all


# ---- KLASS ------------------------------------------------------------------------------------------------
def test_kl_is_infinite_without_a_previous_forward_and_matches_a_hand_computed_value():
    p, q = torch.tensor([[0.5, 0.5]], dtype=torch.float64), torch.tensor([[0.9, 0.1]], dtype=torch.float64)
    assert torch.isinf(kl_step(p, None)).all()
    assert float(kl_step(p, q)[0]) == pytest.approx(0.5 * math.log(0.5 / 0.9) + 0.5 * math.log(0.5 / 0.1), abs=1e-9)
    assert float(kl_step(q, q)[0]) == pytest.approx(0.0, abs=1e-12)
    history = torch.tensor([[0.001, 0.002], [0.001, 0.02], [float("inf"), 0.0]], dtype=torch.float64)
    stable, ready = ready_slots(history, torch.tensor([0.95, 0.95, 0.95]).double(), torch.tensor([True] * 3),
                                0.01, 0.9)
    assert stable.tolist() == [True, False, False] and ready.tolist() == [True, False, False]


CONF = [0.99, 0.98, 0.97, 0.96, 0.5, 0.49, 0.48, 0.47]


def test_klass_commits_stable_confident_slots_from_the_third_forward_else_the_quota():
    tr = run(lambda t: [(20 + k, CONF[k]) for k in range(8)], name="klass", steps=8)   # quota 1 per forward
    c = commits(tr)
    # forward 1: no previous distribution; forward 2: one KL (0) of the two H = 2 needs; forward 3: stable
    assert c[0] == {0: Reason.SCHEDULE} and c[1] == {1: Reason.SCHEDULE}
    assert c[2] == {2: Reason.KL_STABLE, 3: Reason.KL_STABLE}
    assert c[3:] == [{k: Reason.SCHEDULE} for k in range(4, 8)]    # stable but p < τ: the quota, best first
    assert np.isnan(tr.records[0].field("kl")).all() and np.nanmax(tr.records[1].field("kl")) == 0.0
    assert [r.field("klass_ready") for r in tr.records] == [0, 0, 2, 0, 0, 0, 0]
    one = commits(run(lambda t: [(20 + k, CONF[k]) for k in range(8)], name="klass", steps=8, klass_pick="max_conf"))
    assert one[2] == {2: Reason.KL_STABLE} and one[3] == {3: Reason.KL_STABLE}


def test_klass_never_trusts_a_distribution_that_keeps_moving():
    # slots 2 and 3 swap their candidate every forward: KL ≈ 4.5 nats, never below ε; the quota takes them
    def script(t):
        return [(20 + k + (t % 2 if k in (2, 3) else 0), CONF[k]) for k in range(8)]
    tr = run(script, name="klass", steps=8)
    why = {k: reason for s in commits(tr) for k, reason in s.items()}
    assert why[2] == why[3] == Reason.SCHEDULE and len(why) == 8
    assert all(r.field("kl")[2] > 4 for r in tr.records[1:3])


def test_klass_pick_rules():
    ready = torch.tensor([False, True, True, True])
    conf, kl = torch.tensor([0.0, 0.91, 0.97, 0.97]), torch.tensor([0.0, 0.001, 0.005, 0.002])
    assert pick(ready, conf, kl, "all", None).tolist() == [1, 2, 3]
    assert pick(ready, conf, kl, "max_conf", None).tolist() == [2]      # first of equal maxima
    assert pick(ready, conf, kl, "min_kl", None).tolist() == [1]
    g = torch.Generator().manual_seed(0)
    assert pick(ready, conf, kl, "random", g).tolist()[0] in (1, 2, 3)


# ---- credit -----------------------------------------------------------------------------------------------
def test_credit_decays_after_the_first_forward_and_adds_the_boosted_top1():
    probs = torch.tensor([[0.6, 0.4], [0.3, 0.7]])
    masked = torch.tensor([True, False])
    c1 = add_credit(torch.zeros(2, 2), probs, masked, gamma=0.5, beta=0.8, first=True)
    assert c1.flatten().tolist() == pytest.approx([0.6 ** 0.5, 0.0, 0.0, 0.0])        # the unmasked row gets none
    c2 = add_credit(c1, probs, masked, gamma=0.5, beta=0.8, first=False)
    assert float(c2[0, 0]) == pytest.approx(0.6 ** 0.5 * 1.8)
    assert fuse(torch.zeros(2, 2), c2, 0.7)[0, 0].item() == pytest.approx(0.7 * math.log(1 + 0.6 ** 0.5 * 1.8))


def test_credit_commit_bar_is_tau_or_just_below_the_best():
    m = torch.tensor([True, True, True, False])
    assert credit_commit(torch.tensor([0.5, 0.499995, 0.3, 0.99]), m, 0.9).tolist() == [0, 1]   # within 1e-5
    assert credit_commit(torch.tensor([0.95, 0.91, 0.3, 0.99]), m, 0.9).tolist() == [0, 1]


def test_credit_lifts_a_repeated_candidate_over_tau_where_the_threshold_rule_waits():
    conf = [0.8 - 0.001 * k for k in range(8)]
    tr = run(lambda t: [(20 + k, conf[k]) for k in range(8)], name="credit")
    c = commits(tr)
    assert c[0] == {0: Reason.ARGMAX} and c[1] == {1: Reason.ARGMAX}
    assert c[2] == {k: Reason.THRESHOLD for k in range(2, 8)}       # the third forward's credit clears τ = 0.9
    boost = 0.8 ** 0.2
    assert tr.records[0].field("credit")[0] == pytest.approx(boost, rel=1e-5)
    assert tr.records[1].field("credit")[1] == pytest.approx(0.799 ** 0.2 * 1.8, rel=1e-5)
    fused = math.exp(math.log(0.8) + 0.7 * math.log1p(boost))
    assert tr.records[0].confidence[0] == pytest.approx(fused / (fused + 48 * 0.2 / 49), rel=1e-4)
    assert tr.records[0].field("raw_conf")[0] == pytest.approx(0.8 / (1 - 0.2 / 49), rel=1e-5)
    assert len(run(lambda t: [(20 + k, conf[k]) for k in range(8)], name="threshold").records) == 8


@pytest.mark.parametrize("name", ["prophet", "klass", "credit"])
def test_each_rival_has_its_view_in_its_tab(name):
    tr = run(lambda t: [(20 + k, CONF[k]) for k in range(8)], name=name)
    tab = registry.BY_NAME[name].tab
    assert tab in registry.tabs_shown(tr) and registry.tabs_shown(tr).count(tab) == 1
    fig = registry.BY_NAME[name].render(tr, 1, None, None)
    assert fig.to_plotly_json()["data"], "the view draws the run's records"
    other = run(lambda t: [(20 + k, CONF[k]) for k in range(8)], name="threshold")
    assert tab not in registry.tabs_shown(other)


def test_defaults_that_differ_from_the_released_code_are_declared_on_the_card():
    from engine.catalogue import catalogue
    from engine.catalogue.cards import cards
    for name in ("edit", "remdm"):
        declared = cards()[name].reference_defaults
        assert declared, name
        for param, (theirs, why) in declared.items():
            ours = catalogue.params_of(name)[param].default
            assert ours != theirs and len(why) > 40, (name, param)
    assert set(cards()["edit"].reference_defaults) == {"tau", "tau_edit", "post_steps"}
    assert cards()["remdm"].reference_defaults["eta"][0] == 0.008
