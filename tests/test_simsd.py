"""SimSD: the temporal mask replays the drafter's order on the target, self-drafting is lossless, MRS reproduces
q, the two models' caches stay exact."""

import numpy as np
import pytest
import torch

from engine.models import masks
from engine.decoders import build_decoder
from engine.decoders.simsd.policy import verification_mask
from engine.runtime.loop import Generation, Tail
from engine.runtime.runners import make_runner
from engine.models.model import load_model
from engine.decoders.s2d2.verify import accept_stochastic
from tests.conftest import write_sdar_checkpoint
from engine.runtime.jobs import drive

PROMPT = "Ann has 3 apples . She buys 5 more . How many apples does she have now ?"


@pytest.fixture(scope="module")
def one_layer(tmp_path_factory):
    return load_model(str(write_sdar_checkpoint(tmp_path_factory.mktemp("l1"), layers=1, seed=1)), device="cpu")


@pytest.fixture(scope="module")
def two_layer(tmp_path_factory):
    return load_model(str(write_sdar_checkpoint(tmp_path_factory.mktemp("l2"), layers=2, seed=2)), device="cpu")


def replay_error(adapter, steps: list[int]) -> float:
    """Max |copy logits - a separate forward on the block state just before that slot's step| over the slots."""
    cfg = build_decoder("threshold", block_size=8, gen_length=8).cfg
    prompt = adapter.encode_prompt(PROMPT)
    r = make_runner(adapter, prompt, cfg)
    lo = (r.P // 8 + 1) * 8 if r.P % 8 else r.P                # a block fully masked, after the prompt
    r = make_runner(adapter, prompt + [5] * (lo - r.P), build_decoder("threshold", block_size=8, gen_length=8).cfg)
    L, t = 8, np.array(steps)
    drafts = torch.tensor([20 + 3 * k for k in range(L)])
    m = torch.from_numpy(verification_mask("released", 0, t))
    tail = Tail(torch.full((L,), adapter.mask_token_id), torch.arange(lo, lo + L), m[L:, :L], m[L:, L:], m[:L, L:])
    _, copies = drive(r.forward("verify", lo, lo + L, block_mask=m[:L, :L], tail=tail, block_tokens=drafts))
    worst = 0.0
    for i in range(L):
        before = torch.where(torch.from_numpy(t < t[i]), drafts, torch.tensor(adapter.mask_token_id))
        alone, _ = drive(r.forward("draft", lo, lo + L, block_tokens=before))
        worst = max(worst, float((copies[i] - alone[i]).abs().max()))
    return worst


@pytest.mark.parametrize("steps", [[1, 2, 3, 4, 5, 6, 7, 8], [3, 8, 1, 5, 2, 7, 4, 6]], ids=["l2r", "shuffled"])
def test_copies_replay_the_drafters_order_exactly_on_one_layer(one_layer, two_layer, steps):
    assert replay_error(one_layer, steps) < 1e-5
    # with more layers the reference tokens' states come from their own (earlier) block states: approximate
    assert replay_error(two_layer, steps) > 1e-4


def test_self_drafting_accepts_everything_and_equals_the_target(one_layer):
    pol = build_decoder("simsd", drafter=str(one_layer.path), block_size=4, gen_length=16, stop_at_eos=False)
    tr = Generation(one_layer, PROMPT, pol).run()
    blocks = len({r.block for r in tr.records})
    assert tr.meta.summary["acceptance_rate"] == 1.0 and tr.meta.summary["target_forwards"] == blocks   # one verify per block
    alone = Generation(one_layer, PROMPT, build_decoder("llada", block_size=4, steps=4, gen_length=16,
                                                        stop_at_eos=False)).run()
    assert tr.meta.token_ids == alone.meta.token_ids       # the same reveal order, decoded by the target


def test_cached_equals_uncached_and_records(two_layer):
    runs = [Generation(two_layer, PROMPT, build_decoder("simsd", drafter=str(two_layer.path), block_size=4,
                                                        gen_length=12, stop_at_eos=False, use_cache=c,
                                                        acceptance="mrs", temperature=1.0, seed=3)).run()
            for c in (True, False)]
    assert runs[0].meta.final_tokens == runs[1].meta.final_tokens
    v = next(r for r in runs[0].records if r.kind == "verify")
    n = v.field("span")[1]
    assert v.field("attn_mask").shape == (4 + n, 4 + n)
    assert set(np.unique(v.field("step_of"))) <= set(range(0, 5))
    assert runs[0].meta.summary["draft_forwards"] + runs[0].meta.summary["target_forwards"] == runs[0].nfe


def test_mrs_reproduces_q():
    rng = torch.Generator().manual_seed(0)
    p = torch.tensor([[0.5, 0.3, 0.15, 0.05]], dtype=torch.float64)
    q = torch.tensor([[0.1, 0.2, 0.3, 0.4]], dtype=torch.float64)
    counts = np.zeros(4)
    n = 20000
    for _ in range(n):
        d = torch.multinomial(p[0], 1, generator=rng)
        v = accept_stochastic(p, q, d, rng)
        counts[int(d) if v.accepted else v.token] += 1
    chi2 = float((((counts - n * q[0].numpy()) ** 2) / (n * q[0].numpy())).sum())
    assert chi2 < 16.27                                           # df 3, p = 0.001


def test_simplified_mask_is_the_articles_description():
    m = masks.simsd_simplified(0, 1, 3)
    D, M = slice(1, 4), slice(4, 7)
    assert np.array_equal(m[D, D], np.eye(3, dtype=bool)) and not m[D, M].any()
    assert m[M, D].all() and np.array_equal(m[M, M], np.eye(3, dtype=bool)) and m[:, 0].all()


def test_simsd_is_refused_without_a_drafter_and_on_full_attention(adapter):
    from engine.errors import ConfigError
    with pytest.raises(ConfigError, match="no paired drafter"):
        Generation(adapter, PROMPT, build_decoder("simsd", gen_length=8)).run()
    with pytest.raises(ConfigError, match="only the embedded models"):
        build_decoder("simsd", page=True, drafter="/etc")


def test_simsd_views_from_the_trace(two_layer):
    from engine.records.trace import Trace
    from explorer.views.attention import attention_mask
    from explorer.views.simsd import simsd_rounds
    tr = Generation(two_layer, PROMPT, build_decoder("simsd", drafter=str(two_layer.path), block_size=4,
                                                     gen_length=12, stop_at_eos=False, acceptance="mrs",
                                                     temperature=1.0, seed=5)).run()
    tr = Trace.from_bytes(tr.to_bytes())
    rounds = [r for r in tr.records if r.kind == "verify"]
    fig = simsd_rounds(tr, None)
    dots = sum(len(d.x) for d in fig.data if d.type == "scatter")
    assert dots == sum(int((np.asarray(r.field("verdict")) > 0).sum()) for r in rounds)
    kept = next(d for d in fig.data if d.type == "bar" and d.name == "kept")
    assert list(kept.y) == [r.field("accepted") + (r.field("rejected_at") is not None) for r in rounds]
    assert sum(kept.y) == tr.meta.generated_tokens
    am = attention_mask(tr, tr.records.index(rounds[0]))
    assert any("t=" in str(x) for x in am.data[0].x)


def test_the_service_resolves_the_drafter_from_its_own_model_cache(one_layer, two_layer):
    """A decoder never loads a model: SimSD's drafter comes from whoever owns the models (here the service)."""
    from engine.harness.service import DecodeService
    svc = DecodeService(default_model=str(two_layer.path))
    for _ in range(2):
        svc.run("Ann has 3 pens . How many pens does she have now ?", "simsd",
                dict(drafter=str(one_layer.path), block_size=4, gen_length=8))
    assert set(svc._models) == {str(two_layer.path), str(one_layer.path)}   # the drafter in the service's cache
    assert svc.model(str(one_layer.path)) is svc._models[str(one_layer.path)]
