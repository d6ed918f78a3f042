"""Model families: how each published checkpoint layout maps onto a stock transformers class (docs/families.md).

    sdar / qwen3     -> Qwen3ForCausalLM, same keys, position-aligned, block-causal (exact block KV cache)
    Fast_dLLM_Qwen   -> Qwen2ForCausalLM, same keys, logits shifted right by one, block-causal, block = bd_size
    Dream            -> Qwen2ForCausalLM, same keys, logits shifted right by one, full bidirectional, no cache
    llada            -> LlamaForCausalLM, OLMo-style keys renamed one to one, position-aligned, full bidirectional
    diffusion_gemma  -> DiffusionGemmaForBlockDiffusion itself (transformers >= 5.24): an encoder caches the prompt
                        and the finished canvases, a decoder denoises a canvas of uniform-noise tokens ("canvas");
                        its vision tower is loaded with the checkpoint (strict) and never run for text prompts

A family is a config builder (the checkpoint's config.json -> the stock config's fields), the stock class, a weight
renaming (regex -> replacement, applied while loading) and the family's decoding facts. No remote code is used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from transformers import (DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion, LlamaConfig, LlamaForCausalLM,
                          Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM)

# keys of a checkpoint's config.json that are the engine's metadata, not the stock config's
ENGINE_KEYS = ("mask_token_id", "block_size", "bd_size", "unmask", "auto_map", "architectures", "model_type",
               "attn_implementation", "fuse_cross_entropy", "use_deepep", "ep_size", "transformers_version")


def same_keys(raw: dict) -> dict:
    return {k: v for k, v in raw.items() if k not in ENGINE_KEYS}


def llada_config(raw: dict) -> dict:
    """LLaDA's OLMo-style config -> LlamaConfig fields (GSAI-ML's configuration_llada.py names)."""
    r = raw
    return dict(hidden_size=r["d_model"], num_hidden_layers=r["n_layers"], num_attention_heads=r["n_heads"],
                num_key_value_heads=r.get("n_kv_heads") or r["n_heads"], intermediate_size=r["mlp_hidden_size"],
                vocab_size=r.get("embedding_size") or r["vocab_size"], rms_norm_eps=r.get("rms_norm_eps", 1e-5),
                rope_parameters={"rope_type": "default", "rope_theta": float(r.get("rope_theta", 10000.0))},
                max_position_embeddings=r.get("max_sequence_length", 4096), attention_bias=bool(r.get("include_bias")),
                mlp_bias=bool(r.get("include_bias")), tie_word_embeddings=bool(r.get("weight_tying")),
                pad_token_id=r.get("pad_token_id"), bos_token_id=r.get("bos_token_id"), eos_token_id=r.get("eos_token_id"))


LLADA_KEYS = {  # original name (regex) -> LlamaForCausalLM name (one capture group per rule: transformers substitutes
    # only the first)
    r"^model\.transformer\.wte\.": "model.embed_tokens.",
    r"^model\.transformer\.blocks\.(\d+)\.attn_norm\.": r"model.layers.\1.input_layernorm.",
    **{rf"^model\.transformer\.blocks\.(\d+)\.{x}_proj\.": rf"model.layers.\1.self_attn.{x}_proj." for x in "qkv"},
    r"^model\.transformer\.blocks\.(\d+)\.attn_out\.": r"model.layers.\1.self_attn.o_proj.",
    r"^model\.transformer\.blocks\.(\d+)\.ff_norm\.": r"model.layers.\1.post_attention_layernorm.",
    r"^model\.transformer\.blocks\.(\d+)\.ff_proj\.": r"model.layers.\1.mlp.gate_proj.",
    r"^model\.transformer\.blocks\.(\d+)\.up_proj\.": r"model.layers.\1.mlp.up_proj.",
    r"^model\.transformer\.blocks\.(\d+)\.ff_out\.": r"model.layers.\1.mlp.down_proj.",
    r"^model\.transformer\.ln_f\.": "model.norm.",
    r"^model\.transformer\.ff_out\.": "lm_head.",
}


@dataclass(frozen=True)
class Family:
    name: str
    config_cls: type
    model_cls: type
    logit_shift: int                          # 1: the logit for position i is read at i - 1
    attention: str = "block_causal"           # "block_causal" (exact block KV cache), "full" (bidirectional) or
    #                                           "canvas" (encoder cache + a uniform-noise canvas, DiffusionGemma)
    config_map: Callable[[dict], dict] = same_keys
    key_mapping: dict = field(default_factory=dict)
    block_key: str = "block_size"             # the config key holding the training block size
    chat: bool = True                         # instruct checkpoints: prompts go through the chat template


FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("sdar", Qwen3Config, Qwen3ForCausalLM, logit_shift=0),
    Family("qwen3", Qwen3Config, Qwen3ForCausalLM, logit_shift=0),
    Family("Fast_dLLM_Qwen", Qwen2Config, Qwen2ForCausalLM, logit_shift=1, block_key="bd_size"),
    Family("Dream", Qwen2Config, Qwen2ForCausalLM, logit_shift=1, attention="full"),
    Family("llada", LlamaConfig, LlamaForCausalLM, logit_shift=0, attention="full", config_map=llada_config,
           key_mapping=LLADA_KEYS),
    Family("diffusion_gemma", DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion, logit_shift=0,
           attention="canvas", block_key="canvas_length"),
)}
