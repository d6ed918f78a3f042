"""Tiny random checkpoints laid out exactly as each family's published repos: their config.json keys, their weight
names (LLaDA's OLMo-style ``model.transformer.blocks.N...``), a tokenizer with a chat template, generation_config."""

from __future__ import annotations

import json
import re

import torch
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from engine.tasks import get_task
from engine.models.tokenizer import build_tokenizer

CHAT = ("{% for m in messages %}{{ 'Q : ' + m['content'] }}{% endfor %}{% if add_generation_prompt %} A :"
        "{% endif %}")
SIZE = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, intermediate_size=128)


def _tokenizer(path):
    tok = build_tokenizer(get_task("arith").vocabulary())
    tok.chat_template = CHAT
    tok.save_pretrained(path)
    return tok


def _sharpen(model, seed):
    torch.manual_seed(seed)
    with torch.no_grad():
        model.lm_head.weight.mul_(8.0)   # a spread of confidences, as a trained model has


def write_qwen2_family(path, model_type: str, seed: int = 0):
    """Fast_dLLM_Qwen or Dream: Qwen2 weights under their own model_type/architectures/auto_map."""
    path.mkdir(parents=True, exist_ok=True)
    tok = _tokenizer(path)
    torch.manual_seed(seed)
    cfg = Qwen2Config(vocab_size=len(tok), max_position_embeddings=512, tie_word_embeddings=False,
                      rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, **SIZE)
    model = Qwen2ForCausalLM(cfg)
    _sharpen(model, seed)
    model.save_pretrained(path)
    raw = json.loads((path / "config.json").read_text())
    if model_type == "Dream":
        raw.update(model_type="Dream", architectures=["DreamModel"], mask_token_id=tok.mask_token_id,
                   auto_map={"AutoConfig": "configuration_dream.DreamConfig", "AutoModel": "modeling_dream.DreamModel"})
    else:
        raw.update(model_type="Fast_dLLM_Qwen", architectures=["Fast_dLLM_QwenForCausalLM"], bd_size=4,
                   auto_map={"AutoModelForCausalLM": "modeling.Fast_dLLM_QwenForCausalLM"})
    raw.update(eos_token_id=tok.eos_token_id)
    (path / "config.json").write_text(json.dumps(raw))
    (path / "generation_config.json").write_text(json.dumps({"eos_token_id": [tok.eos_token_id]}))
    return path


# LlamaForCausalLM name -> LLaDA's published name, written out independently of engine.models.families.LLADA_KEYS so the
# test checks that table instead of restating it
TO_OLMO = [(r"^model\.embed_tokens\.", "model.transformer.wte."),
           (r"^model\.layers\.(\d+)\.input_layernorm\.", r"model.transformer.blocks.\1.attn_norm."),
           (r"^model\.layers\.(\d+)\.self_attn\.(q|k|v)_proj\.", r"model.transformer.blocks.\1.\2_proj."),
           (r"^model\.layers\.(\d+)\.self_attn\.o_proj\.", r"model.transformer.blocks.\1.attn_out."),
           (r"^model\.layers\.(\d+)\.post_attention_layernorm\.", r"model.transformer.blocks.\1.ff_norm."),
           (r"^model\.layers\.(\d+)\.mlp\.gate_proj\.", r"model.transformer.blocks.\1.ff_proj."),
           (r"^model\.layers\.(\d+)\.mlp\.up_proj\.", r"model.transformer.blocks.\1.up_proj."),
           (r"^model\.layers\.(\d+)\.mlp\.down_proj\.", r"model.transformer.blocks.\1.ff_out."),
           (r"^model\.norm\.", "model.transformer.ln_f."), (r"^lm_head\.", "model.transformer.ff_out.")]


def olmo_name(name: str) -> str:
    for pat, rep in TO_OLMO:
        if re.match(pat, name):
            return re.sub(pat, rep, name)
    raise KeyError(name)


def write_llada(path, seed: int = 0, vocab: int | None = None):
    """LLaDA: OLMo-style config keys and weight names. Returns (path, original-name state dict). ``vocab``: an
    output layer that wide (LLaDA's is 126 464), the tokens past the tokenizer's never the argmax (their output
    rows and embeddings zero: a logit of 0, below every token's the sharpened head puts first)."""
    path.mkdir(parents=True, exist_ok=True)
    tok = _tokenizer(path)
    torch.manual_seed(seed)
    V = vocab or len(tok)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=V, max_position_embeddings=512, tie_word_embeddings=False,
                                         rope_parameters={"rope_type": "default", "rope_theta": 500000.0},
                                         hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                         num_key_value_heads=2, intermediate_size=128))
    _sharpen(model, seed)
    with torch.no_grad():
        model.lm_head.weight[len(tok):] = 0
        model.model.embed_tokens.weight[len(tok):] = 0
    original = {olmo_name(k): v.contiguous() for k, v in model.state_dict().items()}
    save_file(original, str(path / "model.safetensors"), metadata={"format": "pt"})
    raw = dict(model_type="llada", architectures=["LLaDAModelLM"], d_model=64, n_layers=2, n_heads=2, n_kv_heads=2,
               mlp_hidden_size=128, vocab_size=V, embedding_size=V, block_type="llama",
               layer_norm_type="rms", rms_norm_eps=1e-6, rope=True, rope_full_precision=True, rope_theta=500000.0,
               include_bias=False, weight_tying=False, scale_logits=False, max_sequence_length=512,
               mask_token_id=tok.mask_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
               auto_map={"AutoModelForCausalLM": "modeling_llada.LLaDAModelLM"})
    (path / "config.json").write_text(json.dumps(raw))
    return path, original


def write_diffusion_gemma(path, seed: int = 0, canvas: int = 8, generation: dict | None = None):
    """DiffusionGemma as transformers saves it: the stock class's config.json (text and a one-layer vision tower),
    its weights, and a generation_config.json with the decoder's defaults (``generation`` overrides them)."""
    from transformers import DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion, DiffusionGemmaTextConfig
    path.mkdir(parents=True, exist_ok=True)
    tok = _tokenizer(path)
    torch.manual_seed(seed)
    text = DiffusionGemmaTextConfig(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, head_dim=32, global_head_dim=32, max_position_embeddings=512, sliding_window=64,
        layer_types=["sliding_attention", "full_attention"], num_experts=4, top_k_experts=2,
        moe_intermediate_size=64, pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id)
    vision = dict(model_type="gemma4_vision", hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                  num_attention_heads=1, num_key_value_heads=1, head_dim=16, position_embedding_size=64)
    model = DiffusionGemmaForBlockDiffusion(DiffusionGemmaConfig(text_config=text, vision_config=vision,
                                                                 canvas_length=canvas))
    with torch.no_grad():   # sharper random logits: a spread of entropies, some below the bound
        model.model.decoder.norm.weight.mul_(6.0)
    gen = {**dict(max_denoising_steps=12, t_min=0.4, t_max=0.8, stability_threshold=1, confidence_threshold=0.5,
                  sampler_config={"entropy_bound": 1.0, "_cls_name": "EntropyBoundSamplerConfig"},
                  eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id), **(generation or {})}
    model.generation_config = model.generation_config.from_dict(gen)
    model.save_pretrained(path)
    return path


class StaleKV:
    """Stale K/V spliced in by forward hooks on every layer's k_proj / v_proj (a mechanism independent of the
    engine's ``SpliceCache``): while ``block`` is None each forward's outputs are kept; while ``block`` = (lo, hi)
    (row indices of the forward), every row outside it is replaced by the kept (stale) one, so the rows in it
    attend to [stale | fresh | stale] in position order, as Fast-dLLM's ``replace_position`` computes."""

    def __init__(self, model):
        self.saved, self.block = {}, None
        self.handles = [m.register_forward_hook(self.hook(name)) for name, m in model.named_modules()
                        if name.endswith(("k_proj", "v_proj"))]

    def hook(self, name):
        def fn(_, __, out):
            if self.block is None:
                self.saved[name] = out.detach().clone()
                return out
            lo, hi = self.block
            new = self.saved[name].clone()
            new[:, lo:hi] = out[:, lo:hi]
            return new
        return fn

    def close(self):
        for h in self.handles:
            h.remove()
