"""bf16 as the references compute it (engine/models/precision.py): LLaDA against a direct computation from its published
weights with the reference's fp32 islands (RMSNorm and RoPE in fp32), and the families whose reference is their
stock transformers class against that class's own forward, all in bf16 on CPU."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from engine.models.model import load_model
from tests.families import write_llada, write_qwen2_family

BF = torch.bfloat16


def llada_reference_bf16(original: dict, ids: torch.Tensor, heads: int = 2, theta: float = 500000.0) -> torch.Tensor:
    """modeling_llada.py's precision: weights and activations bf16; RMSNorm normalised in fp32 and cast back before
    the weight; q and k rotated in fp32 with fp32 sin/cos and cast back; sdpa in bf16. (n,) -> (n, V) fp32."""
    W = {k: v.to(BF) for k, v in original.items()}
    x = W["model.transformer.wte.weight"][ids]
    n, d = x.shape
    hd = d // heads
    inv = 1.0 / theta ** (torch.arange(0, hd, 2).float() / hd)
    ang = torch.arange(n).float()[:, None] * inv[None]
    cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()             # fp32
    rot = lambda t: torch.cat([-t[..., hd // 2:], t[..., :hd // 2]], -1)  # noqa: E731
    norm = lambda t, w: w * (t.float() * torch.rsqrt(t.float().pow(2).mean(-1, keepdim=True) + 1e-6)).to(BF)  # noqa
    for b in range(2):
        p = f"model.transformer.blocks.{b}."
        h = norm(x, W[p + "attn_norm.weight"])
        q, k, v = ((h @ W[p + f"{c}_proj.weight"].T).view(n, heads, hd).transpose(0, 1) for c in "qkv")
        q, k = ((t.float() * cos + rot(t.float()) * sin).to(BF) for t in (q, k))
        att = F.scaled_dot_product_attention(q[None], k[None], v[None])[0]                  # (heads, n, hd)
        x = x + att.transpose(0, 1).reshape(n, d) @ W[p + "attn_out.weight"].T
        h = norm(x, W[p + "ff_norm.weight"])
        x = x + (F.silu(h @ W[p + "ff_proj.weight"].T) * (h @ W[p + "up_proj.weight"].T)) @ W[p + "ff_out.weight"].T
    return (norm(x, W["model.transformer.ln_f.weight"]) @ W["model.transformer.ff_out.weight"].T).float()


def stock(a):
    """The same adapter with the stock class's own bf16 RoPE (the fp32 island removed)."""
    a.model.model.rotary_emb = a.model.model.rotary_emb.inner
    a.model.set_attn_implementation("sdpa")
    return a


def test_llada_bf16_follows_the_reference_precision(tmp_path):
    path, original = write_llada(tmp_path / "llada")
    ours = load_model(str(path), device="cpu", dtype=BF)
    ids = torch.tensor([1, 20, 21, 3, 3, 3, 22, 40, 41, 3, 3, 50])
    n = len(ids)
    full = torch.ones(n, n, dtype=torch.bool)
    ref = llada_reference_bf16(original, ids)
    got = ours.forward(ids, full, torch.arange(n))
    plain = stock(load_model(str(path), device="cpu", dtype=BF)).forward(ids, full, torch.arange(n))
    err, err_stock = (got - ref).abs().max().item(), (plain - ref).abs().max().item()
    assert err <= 0.02 * ref.abs().max().item() and err < err_stock        # bf16 tolerance; closer than stock RoPE
    assert (got.argmax(-1) == ref.argmax(-1)).all()


@pytest.mark.parametrize("family", ["Dream", "Fast_dLLM_Qwen", "sdar"])
def test_stock_class_families_match_their_class_in_bf16(tmp_path, sdar_dir, family):
    """Our forward (explicit 4D mask, position ids) against the class's own forward in bf16: a causal mask for the
    block-causal families at block size 1, the class's full mask for Dream."""
    path = sdar_dir if family == "sdar" else write_qwen2_family(tmp_path / family, family)
    a = load_model(str(path), device="cpu", dtype=BF)
    ids = torch.tensor([1, 20, 21, 22, 23, 24, 25, 26])
    n = len(ids)
    causal = family != "Dream"
    mask = torch.ones(n, n, dtype=torch.bool)
    mask = mask.tril() if causal else mask
    got = a.forward(ids, mask, torch.arange(n))
    kw = {} if causal else dict(attention_mask=torch.ones(1, 1, n, n, dtype=torch.bool))
    raw = a.model(input_ids=ids[None], **kw).logits[0].float()
    want = torch.cat([raw[:1], raw[:-1]]) if a.logit_shift else raw
    assert torch.allclose(got, want, atol=1e-2 * want.abs().max().item()) and (got.argmax(-1) == want.argmax(-1)).all()


def released_llada_generate(a, prompt_ids: list, gen_length: int, block_length: int, steps: int) -> list:
    """ML-GSAI/LLaDA ``generate.py`` as first released (and copied by most repositories since), greedy with
    low-confidence remasking: ``add_gumbel_noise`` returns the logits at T = 0, ``x0 = argmax``, ``p =
    F.softmax(logits)`` in the logits' own dtype (bf16), ``topk`` over the canvas's confidences. Its lines re-typed,
    the model called as Unmask calls it; [MASK] dropped from the logits, as the engine does."""
    x = torch.tensor([prompt_ids + [a.mask_token_id] * gen_length])
    P, n = len(prompt_ids), len(prompt_ids) + gen_length
    num_blocks = gen_length // block_length
    for num_block in range(num_blocks):
        block_mask_index = x[:, P + num_block * block_length:P + (num_block + 1) * block_length] == a.mask_token_id
        m = int(block_mask_index.sum())
        per = steps // num_blocks
        for k in [m // per + (i < m % per) for i in range(per)]:            # get_num_transfer_tokens
            mask_index = x == a.mask_token_id
            logits = a.forward(x[0], torch.ones(n, n, dtype=torch.bool), torch.arange(n)).to(BF)[None]
            logits[..., a.mask_token_id] = float("-inf")
            x0 = torch.argmax(logits, dim=-1)
            p = F.softmax(logits, dim=-1)
            x0_p = torch.squeeze(torch.gather(p, dim=-1, index=torch.unsqueeze(x0, -1)), -1)
            x0_p[:, P + (num_block + 1) * block_length:] = -float("inf")
            x0 = torch.where(mask_index, x0, x)
            confidence = torch.where(mask_index, x0_p, -float("inf"))
            _, select_index = torch.topk(confidence[0], k=k)
            x[0, select_index] = x0[0, select_index]
    return x[0, P:].tolist()


def test_llada_with_the_release_precision_gives_generate_pys_tokens_in_bf16(tmp_path):
    """bf16 on the CPU, a tiny random LLaDA: ``precision=model`` (the softmax in bf16, ranked over the canvas as
    the release ranks it) writes generate.py's tokens on every problem; float64 (the default) ranks bf16's tied
    confidences by their float64 values and so breaks the ties elsewhere on some."""
    from engine.decoders import build_decoder
    from engine.runtime.loop import Generation
    from engine.tasks import get_task
    path, _ = write_llada(tmp_path / "llada")
    a = load_model(str(path), device="cpu", dtype=BF)
    same = {"model": 0, "float64": 0}
    prompts = [p.prompt for p in get_task("arith").problems("test", 2, seed=1)]
    for prompt in prompts:
        ids = a.encode_prompt(prompt)
        want = released_llada_generate(a, ids, 16, 8, 16)
        for precision in same:
            tr = Generation(a, prompt, build_decoder("llada", block_size=8, steps=8, gen_length=16,
                                                     stop_at_eos=False, precision=precision)).run()
            assert tr.meta.prompt_ids == ids
            same[precision] += tr.meta.final_tokens[tr.meta.prompt_len:] == want
    assert same["model"] == len(prompts) and same["float64"] < len(prompts)
