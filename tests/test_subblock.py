"""Fast-dLLM v2's sub-block decoder against a test-side ``generate`` of its v2 model, written from its description:
the prompt's whole blocks prefilled (and, when the prompt ends on a block boundary, the next token by argmax), then
per block: sub-blocks left to right, each forward over the whole block against the finished blocks' cache, logits
shifted right by one, inside the sub-block every masked slot with p > τ plus the most confident; a finished block's
store forward also gives the next block's first token by argmax. [MASK] is never predicted (as the engine)."""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache

from engine.models import masks
from engine.decoders import build_decoder
from engine.errors import ConfigError
from engine.runtime.loop import Generation
from engine.models.model import load_model
from tests.families import StaleKV, write_qwen2_family


@pytest.fixture(scope="module")
def v2(tmp_path_factory):
    return load_model(str(write_qwen2_family(tmp_path_factory.mktemp("v2") / "m", "Fast_dLLM_Qwen")), device="cpu")


def raw(a, ids, start, cache, keep: bool):
    """Unshifted logits (n, V) of ids at positions start.., block-causal over the cache; the cache keeps them iff
    ``keep``."""
    n, c = len(ids), cache.get_seq_length()
    B = a.block_size
    q, k = torch.arange(start, start + n), torch.arange(0, start + n)
    m = masks.to_backend((k[None] // B) <= (q[:, None] // B), a.attn_impl, a.dtype, a.device)
    out = a.model(input_ids=ids[None], attention_mask=m, position_ids=q[None], cache=cache,
                  use_cache=True).logits[0].float()
    if not keep:
        cache.crop(c - cache.get_seq_length())
    out[:, a.mask_token_id] = float("-inf")
    return out


def reference_v2_generate(a, prompt, new_tokens, small, tau, block_cache=False):
    x, P, cache = list(prompt), len(prompt), DynamicCache(config=a.model.config)
    hooks = StaleKV(a.model) if block_cache else None     # use_block_cache: the block's stale K/V, by hooks
    try:
        return _v2_loop(a, x, P, cache, new_tokens, small, tau, hooks)
    finally:
        if hooks is not None:
            hooks.close()


def _v2_loop(a, x, P, cache, new_tokens, small, tau, hooks):
    B, mask = a.block_size, a.mask_token_id
    if P >= B:
        out = raw(a, torch.tensor(x[:P // B * B]), 0, cache, keep=True)
        if P % B == 0:
            x.append(int(out[-1].argmax()))
    while len(x) < P + new_tokens:
        start = len(x) // B * B
        x += [mask] * (start + B - len(x))
        if hooks is not None:                     # a block's cache is made by a whole-block forward of that block
            hooks.block, hooks.saved = None, {}
        for s in range(0, B, small):
            while mask in x[start + s:start + s + small]:
                if hooks is not None:             # the sub-block alone once its first slot is decided
                    hooks.block = (s, s + small) if x[start + s] != mask and hooks.saved else None
                logits = raw(a, torch.tensor(x[start:]), start, cache, keep=False)
                logits = torch.cat([logits[:1], logits[:-1]])[s:s + small]        # shifted right by one
                p = torch.softmax(logits.double(), -1)
                top = p.argmax(-1)
                conf = p.gather(-1, top[:, None])[:, 0]
                live = torch.tensor([t == mask for t in x[start + s:start + s + small]])
                conf = torch.where(live, conf, torch.tensor(float("-inf")).double())
                pick = (conf > tau) & live
                pick[int(conf.argmax())] = True
                for j in pick.nonzero()[:, 0].tolist():
                    x[start + s + j] = int(top[j])
        if hooks is not None:
            hooks.block = None
        out = raw(a, torch.tensor(x[start:]), start, cache, keep=True)              # store the finished block
        x.append(int(out[-1].argmax()))
    return x[P:P + new_tokens]


@pytest.mark.parametrize("tau,small", [(0.3, 2), (0.9, 2), (0.5, 4), (1.0, 4)])
@pytest.mark.parametrize("prompt_len", [8, 11])       # on a block boundary (the next token from the prefill) or not
def test_subblock_follows_fast_dllm_v2(v2, tau, small, prompt_len):
    prompt = v2.encode_prompt("Ann has 3 apples . She buys 5 more . How many ?")[:prompt_len]
    tr = Generation(v2, prompt, build_decoder("subblock", block_size=4, sub_block=small, tau=tau, gen_length=12,
                                              stop_at_eos=False)).run()
    assert tr.meta.final_tokens[prompt_len:] == reference_v2_generate(v2, prompt, 12, small, tau)


@pytest.mark.parametrize("tau,small,prompt_len", [(0.3, 2, 11), (0.9, 2, 11), (0.6, 2, 8)])
def test_subblock_with_the_block_cache_follows_fast_dllm_v2(v2, tau, small, prompt_len):
    prompt = v2.encode_prompt("Ann has 3 apples . She buys 5 more . How many ?")[:prompt_len]
    tr = Generation(v2, prompt, build_decoder("subblock", block_size=4, sub_block=small, tau=tau, gen_length=12,
                                              stop_at_eos=False, block_cache=True)).run()
    assert tr.meta.final_tokens[prompt_len:] == reference_v2_generate(v2, prompt, 12, small, tau,
                                                                         block_cache=True)
    alone = [r for r in tr.records if (~torch.isnan(torch.tensor(r.confidence))).sum()
             < len(r.positions)]
    assert alone                                            # some forwards did run a sub-block alone
    plain = Generation(v2, prompt, build_decoder("subblock", block_size=4, sub_block=small, tau=tau, gen_length=12,
                                                 stop_at_eos=False)).run()
    gaps = [abs(float(x.confidence[i]) - float(y.confidence[i])) for x, y in zip(tr.records, plain.records)
            for i in range(len(x.positions)) if x.confidence[i] == x.confidence[i]]
    assert max(gaps) > 1e-6                                  # ...and read stale K/V


def test_sub_block_must_divide_the_block():
    with pytest.raises(ConfigError, match="multiple of sub_block"):
        build_decoder("subblock", block_size=8, sub_block=3)


def test_v2_sampler_tempers_then_cuts_the_nucleus_then_renormalises():
    """Hand-computed: logits (2, 1, 0) at T = 2 give softmax (0.506, 0.307, 0.186); with top_p 0.8 the cumulative
    sum first passes 0.8 at the second token, the third is cut, and the kept two renormalise to (0.622, 0.378)."""
    from engine.decoders.subblock.policy import v2_sample
    g = torch.Generator().manual_seed(0)
    logits = torch.tensor([[2.0, 1.0, 0.0]]).repeat(400, 1)
    x, p = v2_sample(logits, 2.0, 0.8, g)
    e = torch.exp(torch.tensor([1.0, 0.5]))
    kept = (e / e.sum()).tolist()                                  # 0.6225, 0.3775
    assert set(x.tolist()) == {0, 1}                               # the cut token is never drawn
    assert torch.allclose(p, torch.tensor(kept, dtype=torch.float64)[x], atol=1e-9)


def test_subblock_thresholds_the_tempered_renormalised_p_of_its_sample():
    """A scripted row: the candidate at p 0.6, the other 49 ids share the rest, [MASK] (id 3) forbidden. At T = 1
    and top_p 0.95 the nucleus keeps the candidate and 42 others, so a drawn candidate reads p = 0.6049 / 0.9505 =
    0.636 (the untempered p the shared sampler reported is 0.605)."""
    from tests.conftest import ScriptedAdapter
    tr = Generation(ScriptedAdapter(lambda t: [(20 + k, 0.6) for k in range(8)]), [1, 10, 11, 12, 13, 14, 15, 16],
                    build_decoder("subblock", block_size=8, sub_block=8, gen_length=8, use_cache=False,
                                  stop_at_eos=False, temperature=1.0, seed=1, tau=0.62)).run()
    own = 0.6 / (1 - 0.4 / 49)                                     # [MASK]'s share moved to the rest
    other = (1 - own) / 48
    kept = own + 42 * other
    seen = {round(float(c), 4) for r in tr.records for c in r.confidence[r.committed]}
    assert seen <= {round(own / kept, 4), round(other / kept, 4)} and round(own / kept, 4) in seen
    first = tr.records[0]
    drawn_own = first.candidate[:8] == torch.arange(20, 28).numpy()
    assert first.n_committed == int(drawn_own.sum())               # 0.636 > τ = 0.62: every drawn candidate, at once
