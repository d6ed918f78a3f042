"""ReMDM as released (kuleshov-group/remdm, ``diffusion.py``'s ``_ddpm_caching_update``): the rates of its four
samplers worked by hand from its formulas, its random ancestral unmasking drawn from the decode's generator, and
remdm-conf's softmax over the whole sequence. Scripted logits as tests/test_revising.py's."""

import math

import pytest
import torch

from engine.decoders.remdm.policy import loop_rates, sigma_cap, sigma_conf, sigma_rescale, unmask_prob
from engine.runtime.sampling import make_generator
from tests.test_revising import remasked_at_forward_1, revised, run
from tests.conftest import ScriptedAdapter
from engine.decoders import build_decoder
from engine.runtime.loop import Generation

CONF = [0.9, 0.8, 0.7, 0.6, 0.55, 0.5, 0.45, 0.4]


def test_the_release_rates_by_hand():
    """S = 4 (α_t, α_s per forward: (0, .25), (.25, .5), (.5, .75), (.75, 1)); a masked slot unmasks with
    q = (α_s − (1 − σ)α_t)/(1 − α_t), the release's ``q_xs_2`` without its [MASK] column."""
    assert [sigma_cap(0.5, j, 4) for j in range(4)] == [0.5, 0.5, 0.5, 0.0]
    # cap: forward 1: (.5 − .5 · .25)/.75 = .5 (= 1/3 + σ·α_t/(1 − α_t) = 1/3 + 1/6); forward 2: (.75 − .25)/.5 = 1
    assert [unmask_prob(sigma_cap(0.5, j, 4), j, 4) for j in range(4)] == pytest.approx([0.25, 0.5, 1.0, 1.0])
    # rescale: σ = η · min(1, (1 − α_s)/α_t): .5 (α_t = 0), .5 · min(1, 2), .5 · .5, .5 · 0
    assert [sigma_rescale(0.5, j, 4) for j in range(4)] == [0.5, 0.5, 0.25, 0.0]
    assert unmask_prob(0.25, 2, 4) == pytest.approx((0.75 - 0.75 * 0.5) / 0.5)          # 0.75
    assert unmask_prob(0.0, 1, 4) == pytest.approx(1 / 3)         # σ = 0: MDLM's 1/(S − j)
    # conf: σ_max · softmax(−p); σ_max = min(1, (1 − .5)/.25) = 1 at forward 1
    e = [math.exp(-0.9), math.exp(-0.5), math.exp(-0.7)]
    assert sigma_conf(torch.tensor([0.9, 0.5, 0.7]), 1, 4).tolist() == pytest.approx([x / sum(e) for x in e])


def test_the_loop_schedule_by_hand():
    """remdm-loop with the release script's t_on = .55, t_off = .05, α_on = .9, η = .02 on S = 10 (t = 1 − j/10)."""
    rates = [loop_rates(0.02, 0.55, 0.05, 0.9, j, 10) for j in range(10)]
    # j = 0: MDLM on move chance 1 − (1 − t)·.9/.45: 1 → .8, so (1 − .8)/1 = .2 unmask, nothing re-masked
    assert rates[0] == pytest.approx((0.0, 0.2))
    # j = 4: t = .6 → move .2, s = .5 → 0: every masked slot unmasks
    assert rates[4] == pytest.approx((0.0, 1.0))
    # j = 5 … 9 (t = .5 … .1, inside (t_off, t_on]): σ = η, unmask σ·α_on/(1 − α_on) = .02 · 9 = .18
    assert all(r == pytest.approx((0.02, 0.18)) for r in rates[5:])
    # t ≤ t_off (S = 100, j = 96: t = .04, s = .03): move t·(1 − α_on)/t_off = .08 → .06: a quarter unmask
    assert loop_rates(0.02, 0.55, 0.05, 0.9, 96, 100) == pytest.approx((0.0, 0.25))


def test_random_ancestral_unmasking_follows_the_seeded_draws():
    """cap, η = .5, S = 4, greedy: forward 0 fills the slots whose uniform is below .25; forward 1 re-masks the
    written ones below σ = .5 and fills the masked ones below .5 (hand rates above). The earlier rule filled the
    ⌈8/4⌉ = 2 most confident slots instead."""
    tr = run(lambda t: [(20 + k, CONF[k]) for k in range(8)], name="remdm", steps=4, eta=0.5, seed=11)
    g = make_generator(11)
    u0, u1 = (torch.rand(8, dtype=torch.float64, generator=g).float().tolist() for _ in range(2))
    first = {k for k in range(8) if u0[k] < 0.25}
    assert {k for k in range(8) if tr.records[0].committed[k]} == first
    assert set(revised(tr.records[1])) == {k for k in first if u1[k] < 0.5}
    assert {k for k in range(8) if tr.records[1].committed[k]} == {k for k in range(8) if k not in first
                                                                   and u1[k] < 0.5}


def test_a_seed_fixes_the_random_fill():
    def go(seed):
        return run(lambda t: [(20 + k, CONF[k]) for k in range(8)], name="remdm", steps=4, seed=seed,
                   remask="loop", t_on=0.8, t_off=0.3, eta=0.3).meta.final_tokens

    assert go(3) == go(3)
    outs = {tuple(r.committed.tolist()) for s in range(6) for r in run(
        lambda t: [(20 + k, CONF[k]) for k in range(8)], name="remdm", steps=4, seed=s).records[:1]}
    assert len(outs) > 1                                         # the first forward's fill depends on the seed


def test_conf_weighs_a_token_against_every_written_token_of_the_sequence():
    """Two blocks of 8, S = 4, LLaDA-style fill (deterministic): at block 2's forward 1 its two written tokens go
    back with σ_max · softmax(−p) over all ten written tokens (σ_max = 1), not over the block's two (about 5x
    likelier); over 30 seeds the re-masked sets follow the sequence-wide σ."""
    cfg = dict(block_size=8, gen_length=16, use_cache=False, stop_at_eos=False, steps=4, remask="conf",
               remdm_fill="confident")
    differ = 0
    for seed in range(30):
        tr = Generation(ScriptedAdapter(lambda t: [(20 + k, CONF[k]) for k in range(8)]), list(range(1, 9)),
                        build_decoder("remdm", seed=seed, **cfg)).run()
        block2 = [r for r in tr.records if r.block == 1]
        p = torch.tensor(tr.records[0].confidence[[0, 1]].tolist())       # the scripted p of slots 0, 1
        every = torch.tensor(tr.records[0].confidence.tolist() + p.tolist())   # block 1's 8 and these 2
        seq = sigma_conf(every, 1, 4)[8:]
        block = sigma_conf(p, 1, 4)
        g = make_generator(seed)
        for _ in range(len(tr.records) - len(block2) + 1):                   # block 1's forwards, block 2's first
            torch.rand(8, dtype=torch.float64, generator=g)
        u = torch.rand(8, dtype=torch.float64, generator=g).float()[:2]
        assert set(revised(block2[1])) == {j for j in (0, 1) if u[j] < seq[j]}
        differ += {j for j in (0, 1) if u[j] < seq[j]} != {j for j in (0, 1) if u[j] < block[j]}
    assert differ > 0


@pytest.mark.parametrize("remask", ["cap", "rescale", "conf", "loop"])
def test_a_first_block_that_holds_the_prompts_tail(remask):
    """A block-causal model's first block starts inside the prompt (5 prompt tokens, B = 8): only its answer slots
    are filled or re-masked, and conf's softmax spans the answer only (it once sliced the block from the answer's
    start, lo − P < 0, and failed)."""
    tr = Generation(ScriptedAdapter(lambda t: [(20 + k, CONF[k]) for k in range(8)]), [1, 10, 11, 12, 13],
                    build_decoder("remdm", block_size=8, gen_length=11, use_cache=False, stop_at_eos=False, steps=4,
                                  eta=0.5, remask=remask, seed=1)).run()
    assert tr.meta.final_tokens[:5] == [1, 10, 11, 12, 13] and 3 not in tr.meta.final_tokens
    assert all(not r.committed[:5].any() for r in tr.records if r.block == 0)


def test_the_release_nucleus_keeps_tokens_while_the_running_sum_is_at_most_p():
    """``nucleus_p`` as the release filters ``p_x0`` (its lines, re-typed): on [.5, .3, .15, .05] at p = .9 it keeps
    two (.5, .8 ≤ .9; .95 crosses), where the shared top-p keeps the crossing token too; the first always stays."""
    from engine.decoders.remdm.policy import release_nucleus
    from engine.runtime.sampling import filter_logits

    def released(p_x0, p):
        sorted_probs, sorted_indices = torch.sort(p_x0, descending=True, dim=-1)
        top_p_mask = torch.cumsum(sorted_probs, dim=-1) <= p
        top_p_mask[..., 0] = True
        nucleus_probs = sorted_probs * top_p_mask
        nucleus_probs /= nucleus_probs.sum(dim=-1, keepdim=True)
        return torch.zeros_like(p_x0).scatter_(-1, sorted_indices, nucleus_probs)

    p = torch.tensor([[0.15, 0.5, 0.05, 0.3]], dtype=torch.float64)
    assert release_nucleus(p, 0.9)[0].tolist() == pytest.approx([0.0, 0.625, 0.0, 0.375], abs=1e-15)
    assert torch.isfinite(filter_logits(p.log(), top_p=0.9)).sum() == 3
    assert release_nucleus(p, 0.2).tolist() == [[0.0, 1.0, 0.0, 0.0]]
    g = make_generator(0)
    for q in (0.3, 0.7, 0.9, 0.95):
        x = torch.softmax(torch.randn(4, 50, dtype=torch.float64, generator=g) * 3, -1)
        assert torch.equal(release_nucleus(x, q), released(x, q))


def test_conf_keeps_the_probability_after_the_nucleus_renormalises():
    """T = 0, top-p .5: each scripted token holds about .5 to .9 of the mass, so the nucleus is the token alone and
    its renormalised probability 1: every written token then weighs the same (σ = ½ each at forward 1), where the
    unfiltered .9 and .8 would give .475 and .525; over 40 seeds the re-masked sets follow the renormalised one."""
    right = sigma_conf(torch.tensor([1.0, 1.0]), 1, 4)
    wrong = sigma_conf(torch.tensor(CONF[:2]), 1, 4)
    differ = 0
    for seed in range(40):
        tr = run(lambda t: [(20 + k, CONF[k]) for k in range(8)], name="remdm", steps=4, remask="conf", top_p=0.5,
                 seed=seed, remdm_fill="confident")
        expected, differs = remasked_at_forward_1(seed, right, wrong)
        assert set(revised(tr.records[1])) == expected
        differ += differs
    assert differ > 0


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_step_that_changed_nothing_runs_no_forward(temperature):
    """The release's ``p_x0_cache``: after a step that filled and re-masked nothing, the next step samples the same
    distribution without a forward (its record at the same NFE); every other step runs one. The scripted model
    counts its forwards."""
    skipped = 0
    for seed in range(20):
        adapter = ScriptedAdapter(lambda t: [(20 + k, CONF[k]) for k in range(8)])
        tr = Generation(adapter, [1, 10, 11, 12, 13, 14, 15, 16], build_decoder(
            "remdm", block_size=8, gen_length=8, use_cache=False, stop_at_eos=False, steps=4, eta=0.5, seed=seed,
            temperature=temperature)).run()
        assert adapter.calls == tr.nfe
        for a, b in zip(tr.records, tr.records[1:]):
            idle = not a.committed.any() and not revised(a)
            assert b.nfe == a.nfe + (not idle)
            skipped += idle
    assert skipped > 0
