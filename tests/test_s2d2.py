"""S2D2: verifier exactness, losslessness of acceptance, router invariants, NFE accounting."""

from pathlib import Path

import numpy as np
import pytest
import torch

from engine.models import masks
from engine.decoders import build_decoder
from engine.decoders.s2d2.policy import first_span
from engine.runtime.loop import Generation
from engine.runtime.runners import make_runner
from engine.decoders.s2d2.estimators import alpha, expected_accepted
from engine.decoders.s2d2.routers import UCB, Hysteresis, RouterInputs
from engine.decoders.s2d2.verify import accept_stochastic, verify_logits
from engine.runtime.sampling import make_generator
from engine.runtime.jobs import drive
from engine.decoders.s2d2.card import S2D2Summary

EMBEDDED = Path(__file__).resolve().parent.parent / "assets" / "models" / "unmask-arith-tiny"


def test_verifier_logits_equal_separate_ar_forwards(adapter):
    torch.manual_seed(0)
    prompt = adapter.encode_prompt("Dan has 41 toys . He sells 9 toys . How many toys does he have now ?")
    B = 8
    cfg = build_decoder("s2d2", block_size=B, gen_length=24, cache_ver=True).cfg
    r = make_runner(adapter, prompt, cfg, prefix_causal=True)
    lo0 = (r.P // B) * B
    lo, hi = lo0 + B, lo0 + 2 * B
    V = adapter.vocab_size
    r.tokens[r.P:lo] = torch.randint(5, V, (lo - r.P,))          # the first block, decided
    r.tokens[lo:lo + 3] = torch.randint(5, V, (3,))              # 3 decided tokens, then a masked span
    drive(r.forward("draft", lo, hi))                                   # caches the first block (token-causal)
    span = first_span(r.masked(lo, hi))
    assert span.tolist() == list(range(3, 8))
    filled = r.tokens[lo:hi].clone()
    filled[span] = torch.randint(5, V, (len(span),))
    q = drive(verify_logits(r, lo, hi, filled))
    for i in span.tolist():
        ids = torch.cat([r.tokens[:lo], filled[:i], torch.tensor([adapter.mask_token_id])])
        n = len(ids)
        ref = adapter.forward(ids, masks.causal(torch.arange(n), torch.arange(n)), torch.arange(n))[-1]
        assert (q[i] - ref).abs().max().item() < 1e-5


def _equal_to_ar(adapter, prompts, gen_length):
    for prompt in prompts:
        ar = Generation(adapter, prompt, build_decoder("ar", gen_length=gen_length)).run()
        for B in (4, 8):
            s = Generation(adapter, prompt, build_decoder("s2d2", router="always", acceptance="greedy",
                                                          cache_ver=True, block_size=B,
                                                          gen_length=gen_length)).run()
            assert s.meta.token_ids == ar.meta.token_ids, (prompt, B)
            assert s.meta.nfe_by_kind["verify"] >= 1


def test_always_greedy_equals_ar_random_model(adapter, arith):
    _equal_to_ar(adapter, [p.prompt for p in arith.problems("test", 5, seed=1)], 20)


@pytest.mark.skipif(not (EMBEDDED / "model.safetensors").exists(), reason="embedded model not built")
def test_always_greedy_equals_ar_embedded_model(arith):
    from engine.models.model import load_model
    _equal_to_ar(load_model("tiny", device="cpu"), [p.prompt for p in arith.problems("test", 20, seed=0)], 48)


def test_stochastic_acceptance_samples_exactly_q():
    """χ² goodness of fit: the committed token at a verified position is distributed as q, not p."""
    p = torch.tensor([[0.5, 0.2, 0.15, 0.1, 0.05]], dtype=torch.float64)
    q = torch.tensor([[0.1, 0.3, 0.05, 0.25, 0.3]], dtype=torch.float64)
    g = make_generator(123)
    n = 20000
    counts = np.zeros(5)
    for _ in range(n):
        x = torch.multinomial(p[0].float(), 1, generator=g)
        v = accept_stochastic(p, q, x, g)
        counts[int(x) if v.accepted == 1 else v.token] += 1
    expected = q[0].numpy() * n
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 18.47, (chi2, counts)            # df = 4, p = 0.001
    chi2_p = ((counts - p[0].numpy() * n) ** 2 / (p[0].numpy() * n)).sum()
    assert chi2_p > 1000                           # and it is clearly not p


def test_estimators_and_k_hat():
    p = torch.tensor([[1.0, 0.0, 0.0], [1 / 3, 1 / 3, 1 / 3]], dtype=torch.float64)
    assert alpha(p, "entropy", beta=1.0).tolist() == pytest.approx([1.0, np.exp(-1)])
    assert alpha(p, "margin").tolist() == [1.0, 0.0]
    assert alpha(p, "renyi2").tolist() == pytest.approx([1.0, 1 / 3])
    assert expected_accepted(torch.tensor([0.5, 0.5, 1.0])) == pytest.approx(0.5 + 0.25 + 0.25)
    assert expected_accepted(torch.tensor([])) == 0.0


def _inputs(score, span=3, L=8, progress=0.0, ent=0.2):
    return RouterInputs(span_len=span, block_len=L, progress=progress, alpha=[], k_hat=0, n_hi=0, score=score,
                        mean_entropy=ent)


def test_hysteresis_switching():
    h = Hysteresis(tau_on=1.0, tau_off=-2.0)
    seq = [0.5, 0.99, 1.0, 1.01, 0.0, -1.9, -2.0, -2.01, 0.5, 1.2]
    got = [h.decide(_inputs(s))[0] for s in seq]   # on strictly above τ_on (the released code), off below τ_off
    assert got == [False, False, False, True, True, True, True, False, False, True]
    h.reset()
    assert h.decide(_inputs(0.0))[0] is False


def test_ucb_tries_each_action_once_per_bucket_then_exploits():
    u = UCB(beta=1.0, bins=2)
    x = _inputs(0.0)
    first, _ = u.decide(x)
    u.update(first, 4 if first else 1)
    second, _ = u.decide(x)
    u.update(second, 4 if second else 1)
    assert {first, second} == {True, False}
    y = _inputs(0.0, span=8, progress=0.9, ent=0.9)          # a different bucket starts exploring again
    assert u.bucket(y) != u.bucket(x)
    d, info = u.decide(y)
    assert info["counts"] == [0, 0]
    u.update(d, 1)
    for _ in range(20):                                       # verify pays 4/2 = 2 per forward, skip 1
        d, info = u.decide(x)
        u.update(d, 4 if d else 1)
    assert info["counts"][1] > info["counts"][0]


def test_router_invariants_on_model(adapter, arith):
    prompt = arith.problems("test", 1, seed=2)[0].prompt
    tr = Generation(adapter, prompt, build_decoder("s2d2", router="score", cost=0.0, tau_score=0.0,
                                                   score_type="static", block_size=8, gen_length=24)).run()
    drafts = [r for r in tr.records if r.kind == "draft"]
    assert drafts and all(r.extra["router"]["decision"] for r in drafts if r.extra["router"]["span"])
    never = Generation(adapter, prompt, build_decoder("s2d2", router="never", tau=0.5, block_size=8,
                                                      gen_length=24)).run()
    thr = Generation(adapter, prompt, build_decoder("threshold", rule="sdar", tau=0.5, block_size=8,
                                                    gen_length=24)).run()
    assert never.meta.final_tokens == thr.meta.final_tokens and never.nfe == thr.nfe


@pytest.mark.parametrize("fuse", [True, False])
def test_nfe_accounting(adapter, fuse):
    tr = Generation(adapter, "Iris has 7 rocks . How many rocks are there now ?",
                    build_decoder("s2d2", router="ucb", block_size=4, gen_length=20, fuse_commit=fuse,
                                  stop_at_eos=False)).run()
    kinds = tr.meta.nfe_by_kind
    assert sum(kinds.values()) == tr.nfe == len(tr.records)
    assert kinds.get("draft", 0) == sum(r.kind == "draft" for r in tr.records)
    assert kinds.get("verify", 0) == sum(r.kind == "verify" for r in tr.records) == tr.meta.own(S2D2Summary).verify_forwards
    assert (kinds.get("commit", 0) + kinds.get("prefill", 0) > 0) == (not fuse)


def test_presets_and_overrides():
    pol = build_decoder("s2d2", preset="sdar-a")
    assert pol.cfg.block_size == 4 and pol.cfg.cache_ver and pol.cfg.router == "score" and pol.cfg.tau == 0.85
    pol = build_decoder("s2d2", preset="speed", tau_off="-3")
    assert pol.cfg.router == "hysteresis" and pol.cfg.tau_off == -3.0 and pol.cfg.block_size == 16


def test_always_greedy_equals_ar_on_fast_dllm_v2(tmp_path, arith):
    """Fast-dLLM v2 (logits shifted right by one): the verifier is one token-causal forward, and S2D2
    with router=always and greedy acceptance is lossless against AR."""
    from engine.models.model import load_model
    from tests.families import write_qwen2_family
    v2 = load_model(str(write_qwen2_family(tmp_path / "v2", "Fast_dLLM_Qwen")), device="cpu")
    assert v2.logit_shift == 1
    _equal_to_ar(v2, [p.prompt for p in arith.problems("test", 4, seed=2)], 16)
