"""The settled deviations from the released S2D2 / SDAR / SimSD code, each on a hand-computed case."""

import math

import torch

from engine.decoders import build_decoder
from engine.decoders.schedule import block_schedule
from engine.runtime.loop import Generation
from engine.decoders.s2d2.estimators import alpha
from engine.decoders.s2d2.routers import UCB, Hysteresis, RouterInputs
from engine.decoders.s2d2.verify import accept_stochastic
from engine.runtime.sampling import transformed_probs
from tests.conftest import ScriptedAdapter
from engine.decoders.simsd.card import SimSDSummary


def inputs(score=0.0, span_len=1, block_len=8, progress=0.0, mean_entropy=0.0) -> RouterInputs:
    return RouterInputs(span_len=span_len, block_len=block_len, progress=progress, alpha=[], k_hat=0.0, n_hi=0,
                        score=score, mean_entropy=mean_entropy)


def test_hysteresis_switches_on_strictly_above_tau_on():
    h = Hysteresis(tau_on=1.0, tau_off=-2.0)
    assert h.decide(inputs(score=1.0))[0] is False        # s = τ_on: the released code's `>` stays off
    assert h.decide(inputs(score=1.0 + 1e-9))[0] is True
    assert h.decide(inputs(score=-2.0))[0] is True        # on: stays on unless s < τ_off
    assert h.decide(inputs(score=-2.1))[0] is False


def test_ucb_bins_as_the_released_linear_bins():
    u = UCB(bins=2)
    # span |C| = 5 of B = 8 over [1, 8]: int(4/7 · 2) = 1; progress 0.5: int(0.5 · 2) = 1 (the old 1e-9 gave 0);
    # entropy 0.49: 0 -> bucket (1·2 + 1)·2 + 0 = 6
    assert u.bucket(inputs(span_len=5, progress=0.5, mean_entropy=0.49)) == 6
    assert u.bucket(inputs(span_len=4, progress=0.49, mean_entropy=1.0)) == 1   # top edge: the last bin
    assert u.bucket(inputs(span_len=0, progress=0.0, mean_entropy=0.0)) == 0    # an empty span bins as 1


def test_block_schedule_is_over_b_not_the_masked_count():
    assert block_schedule(8, 4) == [2, 2, 2, 2]
    assert block_schedule(8, 3) == [3, 3, 2]
    assert block_schedule(4, 8) == [1, 1, 1, 1]           # steps > B capped at B (the reference schedules 0s)


def test_sdar_rule_on_a_block_holding_the_prompt_tail_commits_b_over_steps_per_step():
    # prompt of 11 ids, B = 8: the first block holds 3 prompt ids and 5 masked slots. Quota over B = 8 with 4 steps
    # is 2 per step, so the 5 slots take 2, 2, 1 (scheduling over the 5 masked would give 2, 1, 1, 1).
    conf = [0.5, 0.5, 0.5, 0.6, 0.7, 0.4, 0.3, 0.2]
    prompt = [1, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]
    policy = build_decoder("threshold", rule="sdar", tau=0.99, steps=4, block_size=8, gen_length=5,
                           use_cache=False, stop_at_eos=False)
    tr = Generation(ScriptedAdapter(lambda t: [(20 + k, conf[k]) for k in range(8)]), prompt, policy).run()
    assert [int(r.committed.sum()) for r in tr.records] == [2, 2, 1]


def test_s2d2_router_never_still_equals_the_sdar_threshold_rule_on_the_prompt_tail():
    conf = [0.5, 0.5, 0.5, 0.95, 0.7, 0.96, 0.3, 0.2]
    prompt = [1, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]
    common = dict(tau=0.9, steps=4, block_size=8, gen_length=5, use_cache=False, stop_at_eos=False)
    script = lambda t: [(20 + k, conf[k]) for k in range(8)]   # noqa: E731
    a = Generation(ScriptedAdapter(script), prompt, build_decoder("threshold", rule="sdar", **common)).run()
    b = Generation(ScriptedAdapter(script), prompt, build_decoder("s2d2", router="never", **common)).run()
    assert [r.committed.tolist() for r in a.records] == [r.committed.tolist() for r in b.records]


def test_greedy_probabilities_ignore_top_k_and_top_p():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
    plain = torch.softmax(logits.double(), -1)
    assert torch.allclose(transformed_probs(logits, 0.0, top_k=1, top_p=0.5), plain)
    hot = transformed_probs(logits, 1.0, top_k=2)
    assert hot[0, 2] == 0 and math.isclose(float(hot[0, 0]), math.e / (math.e + 1))


def test_confidence_power_reads_the_drafted_tokens_probability():
    p = torch.tensor([[0.6, 0.3, 0.1]], dtype=torch.float64)
    assert math.isclose(float(alpha(p, "confidence", rho=0.8, sampled_p=torch.tensor([0.3], dtype=torch.float64))[0]), 0.3 ** 0.8)
    assert math.isclose(float(alpha(p, "confidence", rho=0.8)[0]), 0.6 ** 0.8)


def test_a_draft_the_drafter_gave_zero_probability():
    p = torch.tensor([[0.0, 1.0, 0.0]], dtype=torch.float64)       # drafted token 0 has p = 0
    q = torch.tensor([[0.5, 0.0, 0.5]], dtype=torch.float64)
    g = torch.Generator().manual_seed(0)
    clamp = accept_stochastic(p, q, torch.tensor([0]), g)          # S2D2: q / max(p, 1e-12) -> 1: accepted
    assert clamp.accepted == 1 and clamp.ratios == [1.0]
    tokens = set()
    for seed in range(40):                                         # SimSD's MRS: rejected, resampled from q
        v = accept_stochastic(p, q, torch.tensor([0]), torch.Generator().manual_seed(seed), zero_p="reject")
        assert v.accepted == 0 and v.rejected_at == 0 and v.ratios == [0.0]
        tokens.add(v.token)
    assert tokens == {0, 2}                                        # q's support, not the residual's (only 2)


def test_mrs_with_a_greedy_drafter_says_it_is_biased():
    from engine.models.model import load_model
    target = load_model("unmask-tasks-small", device="cpu")
    prompt = "Q : Name two different fruits . A :"
    mrs = Generation(target, prompt, build_decoder("simsd", acceptance="mrs", block_size=4, gen_length=8)).run()
    assert "biased" in mrs.meta.own(SimSDSummary).caveat
    hot = build_decoder("simsd", acceptance="mrs", block_size=4, gen_length=8, temperature=1.0)
    assert Generation(target, prompt, hot).run().meta.own(SimSDSummary).caveat is None


def test_simsd_reveal_order_reads_the_tempered_probability():
    from types import SimpleNamespace

    from engine.decoders.simsd.policy import reveal_scores
    # slot 0: one close rival; slot 1: four weak ones. Untempered p(top) 0.525 < 0.649, at T = 2 0.512 > 0.405.
    logits = torch.tensor([[2.0, 1.9, -9.0, -9.0, -9.0], [2.0, 0.0, 0.0, 0.0, 0.0]])
    top = torch.tensor([0, 0])
    _, cold = reveal_scores(logits, top, SimpleNamespace(temperature=0.0, top_k=0, top_p=1.0))
    _, hot = reveal_scores(logits, top, SimpleNamespace(temperature=2.0, top_k=0, top_p=1.0))
    assert cold[1] > cold[0] and hot[0] > hot[1]
    assert math.isclose(float(hot[1]), math.e / (math.e + 4), rel_tol=1e-9)


def test_simsd_target_q_is_the_plain_softmax():
    from engine.decoders.simsd.policy import target_probs
    logits = torch.tensor([[1.0, 0.0, -1.0]])
    z = math.e + 1 + 1 / math.e
    assert torch.allclose(target_probs(logits)[0], torch.tensor([math.e / z, 1 / z, 1 / (math.e * z)],
                                                                dtype=torch.float64))
