"""Masks, cache rollback, and the exactness of the block KV cache."""

import pytest
import torch

from engine.models import masks
from engine.runtime.cache import BlockCache
from engine.decoders import build_decoder
from engine.runtime.loop import Generation
from engine.runtime.runners import make_runner
from engine.runtime.jobs import drive


def test_block_causal_pattern():
    pos = torch.arange(8)
    m = masks.block_causal(pos, pos, 4)
    assert m[0, 3] and m[3, 0] and not m[3, 4] and m[4, 3] and m[5, 7]


def test_verifier_2l_mask_matches_spec_example():
    m = masks.verifier_2l(cache_len=2, L=4)
    assert m.shape == (8, 10)
    assert m[:, :2].all()
    inner = m[:, 2:].astype(int).tolist()
    assert inner[4] == [0, 0, 0, 0, 1, 0, 0, 0]
    assert inner[7] == [1, 1, 1, 0, 0, 0, 0, 1]
    assert inner[3] == [1, 1, 1, 1, 0, 0, 0, 0]


def test_to_backend_eager_is_additive_and_rejects_empty_rows():
    m = masks.block_causal(torch.arange(4), torch.arange(4), 2)
    add = masks.to_backend(m, "eager", torch.float32, "cpu")
    assert add.dtype == torch.float32 and add[0, 0, 0, 0] == 0 and add[0, 0, 0, 2] == torch.finfo(torch.float32).min
    assert masks.to_backend(m, "sdpa", torch.float32, "cpu").dtype == torch.bool
    with pytest.raises(AssertionError):
        masks.to_backend(torch.zeros(2, 2, dtype=torch.bool), "sdpa", torch.float32, "cpu")
    assert masks.partial_causal_draft(1, 4, 2).astype(int).tolist() == [[1, 1, 0, 0, 0], [1, 1, 1, 0, 0],
                                                                       [1, 1, 1, 1, 1], [1, 1, 1, 1, 1]]


def test_rollback_uses_negative_crop(adapter):
    c = BlockCache(adapter.new_cache())
    r = make_runner(adapter, [1, 5, 6, 7, 8, 9], build_decoder("threshold", block_size=4).cfg)
    r.cache = c
    drive(r.forward("draft", 4, 8))
    assert len(c) == 4            # the prefix block is kept, the current block rolled back
    c.rollback(4)                 # no-op, never crop(0)
    assert len(c) == 4
    c.rollback(2)
    assert len(c) == 2
    with pytest.raises(ValueError):
        c.rollback(3)


@pytest.mark.parametrize("B", [1, 4, 8])
def test_cached_logits_equal_uncached(adapter, B):
    prompt = adapter.encode_prompt("Ann has 3 apples . She buys 5 more . How many apples does she have now ?")
    cfg_c = build_decoder("threshold", block_size=B, gen_length=16).cfg
    cfg_u = build_decoder("threshold", block_size=B, gen_length=16, use_cache=False).cfg
    rc, ru = make_runner(adapter, prompt, cfg_c), make_runner(adapter, prompt, cfg_u)
    worst = 0.0
    for lo in range((rc.P // B) * B, rc.end, B):
        hi = min(lo + B, rc.end)
        while (rc.tokens[lo:hi] == adapter.mask_token_id).any():
            lc, _ = drive(rc.forward("draft", lo, hi))
            lu, _ = drive(ru.forward("draft", lo, hi))
            worst = max(worst, (lc - lu).abs().max().item())
            i = int(torch.nonzero(rc.tokens[lo:hi] == adapter.mask_token_id)[0, 0])
            tok = rc.unmaskable(lc)[i].argmax()
            rc.tokens[lo + i] = tok
            ru.tokens[lo + i] = tok
    assert worst < 1e-5


@pytest.mark.parametrize("spec", [dict(name="threshold", tau=0.6, block_size=8),
                                  dict(name="llada", block_size=4, steps=2),
                                  dict(name="threshold", rule="sdar", tau=0.5, block_size=4)])
def test_cached_and_uncached_decode_same_tokens(adapter, spec):
    spec = dict(spec)
    name = spec.pop("name")
    prompt = "Ben has 12 coins . He finds 7 more . How many coins does he have now ?"
    a = Generation(adapter, prompt, build_decoder(name, gen_length=24, **spec)).run()
    b = Generation(adapter, prompt, build_decoder(name, gen_length=24, use_cache=False, **spec)).run()
    c = Generation(adapter, prompt, build_decoder(name, gen_length=24, fuse_commit=False, **spec)).run()
    assert a.meta.final_tokens == b.meta.final_tokens == c.meta.final_tokens
    assert a.nfe == b.nfe
    assert c.meta.nfe_by_kind.get("commit", 0) >= 1 and c.nfe > a.nfe


def test_simsd_temporal_mask_matches_spec_example():
    m = masks.simsd_temporal(cache_len=1, n_known=0, steps=[1, 2, 3, 4])
    assert m.shape == (8, 9) and m[:, 0].all()
    assert m[:, 1:].astype(int).tolist() == [
        [1, 0, 0, 0, 0, 1, 1, 1], [1, 1, 0, 0, 0, 0, 1, 1], [1, 1, 1, 0, 0, 0, 0, 1], [1, 1, 1, 1, 0, 0, 0, 0],
        [0, 0, 0, 0, 1, 1, 1, 1], [1, 0, 0, 0, 0, 1, 1, 1], [1, 1, 0, 0, 0, 0, 1, 1], [1, 1, 1, 0, 0, 0, 0, 1]]
    # each query sees exactly one version (token or mask) of every block position
    m2 = masks.simsd_temporal(0, 2, [3, 1, 2])
    assert (m2[2:, 2:5] ^ m2[2:, 5:8]).all() and not m2[:2, 2:].any() and m2[:, :2].all()
