"""Where the reference modeling code keeps fp32 when the model runs in bf16, and how the stock classes are made to
do the same (``apply``, called by the loader for a model loaded in a lower precision).

    LLaDA  (GSAI-ML / Fast-dLLM ``modeling_llada.py``)
           RMSNorm    normalises in fp32, casts back, then scales         = the stock LlamaRMSNorm
           RoPE       sin/cos in fp32; q and k cast to fp32, rotated, cast back to bf16
                      (the stock Llama casts sin/cos to bf16 and rotates in bf16)    -> ``rope_in_fp32``
           attention  scaled_dot_product_attention in bf16 (fp32 inside the kernel) = the stock sdpa path
    Dream  (``modeling_dream.py``): sin/cos cast to bf16 and the rotation in bf16, RMSNorm in fp32, as the stock
           Qwen2 classes; its eager path takes the softmax in fp32, as the stock eager path
    SDAR, Fast-dLLM v2: their stock transformers classes (Qwen3, Qwen2) are the reference
    every family: RoPE tables (inv_freq) stay fp32 (the loader passes dtype at load, so they are never cast)

``rope_in_fp32`` makes the rotary module return fp32 sin/cos, so q·cos + rotate(q)·sin is computed in fp32 (type
promotion of the bf16 q), and an attention function cast q and k back to the value dtype, as LLaDA's ``type_as``.
Keys enter the KV cache before that cast, in fp32: bf16(rotated in fp32) either way, at twice the cache memory.
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.models.llama.modeling_llama import eager_attention_forward


def _cast_back(inner):
    def attend(module, query, key, value, attention_mask, **kwargs):
        return inner(module, query.to(value.dtype), key.to(value.dtype), value, attention_mask, **kwargs)
    return attend


AttentionInterface.register("sdpa_rope32", _cast_back(sdpa_attention_forward))
AttentionInterface.register("eager_rope32", _cast_back(eager_attention_forward))


class Fp32Rotary(torch.nn.Module):
    """The model's rotary embedding, returning its sin/cos in fp32 whatever the hidden states' dtype."""

    def __init__(self, inner: torch.nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, x, position_ids):
        return self.inner(torch.empty(0, dtype=torch.float32, device=x.device), position_ids)


def rope_in_fp32(model, attn_impl: str) -> None:
    model.model.rotary_emb = Fp32Rotary(model.model.rotary_emb)
    model.set_attn_implementation(f"{attn_impl}_rope32")


def apply(model, family: str, dtype: torch.dtype, attn_impl: str) -> None:
    """Follow the reference's fp32 islands for a model of ``family`` loaded in ``dtype``."""
    if family == "llada" and dtype != torch.float32:
        rope_in_fp32(model, attn_impl)
