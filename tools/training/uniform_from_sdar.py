"""Map an SDAR (Qwen3 block-diffusion) model's weights into a stock ``DiffusionGemmaForBlockDiffusion``.

Why: a uniform-noise model trained from scratch on this CPU learnt the answers' form but not the arithmetic
(unmask-uniform-small, 0.18). ``unmask-tasks-small`` already knows the tasks, and its structure is DiffusionGemma's:
a causal context plus a bidirectional block (SDAR's block, DiffusionGemma's canvas), the same weights for both.
Starting the canvas model from its weights leaves only the noise (random ids instead of [MASK]) to learn.

The layers differ; what maps exactly and what is calibrated (on the SDAR model's own activations over training
problems, ``calibrate``):

    exact        input and pre-MLP norms, q/k/v/o and MLP weights (activation silu), q/k norms (DiffusionGemma's
                 attention scale is 1, so q_norm carries SDAR's 1/sqrt(head_dim)), rotary (theta 10 000 on every
                 layer), the tied head (the final norm absorbs the embedding's rescaling)
    calibrated   DiffusionGemma normalises v per head (no scale) and each sublayer's output (post-norms): their
                 weights are set to the mean RMS SDAR's activations have there, so the residual stream is SDAR's
                 times k = 1 / RMS(embedding) up to each token's spread around the mean
    zero         the experts (their post-norm weight 0: the dense MLP alone, as in SDAR) and the self-conditioning
                 MLP's down projection (no signal until training gives it one); both are trained from there
    approximate  the last layer: DiffusionGemma forces a full-attention layer last, whose values are its keys;
                 SDAR's values there are not reproducible, so that layer starts with keys as values

    OMP_NUM_THREADS=1 python -m tools.training.uniform_from_sdar --src assets/models/unmask-tasks-small \
        --out runs/uniform-init
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import torch
from transformers import (AutoTokenizer, DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion,
                          DiffusionGemmaTextConfig, Qwen3Config, Qwen3ForCausalLM)

from engine.tasks import get_task

MOE = 8          # the stock layer always has experts: the smallest that keeps the size within the issue's +20 %


def load_sdar(src: str) -> Qwen3ForCausalLM:
    import json
    from safetensors.torch import load_file
    cfg = json.loads((Path(src) / "config.json").read_text())
    for k in ("model_type", "architectures", "mask_token_id", "block_size", "unmask", "transformers_version"):
        cfg.pop(k, None)
    model = Qwen3ForCausalLM(Qwen3Config(**cfg))
    model.load_state_dict(load_file(str(Path(src) / "model.safetensors")), strict=False)
    model.tie_weights()
    return model.eval()


def gemma_config(q: Qwen3Config, tok, canvas: int, softcap: float) -> DiffusionGemmaConfig:
    layers, rope = q.num_hidden_layers, {"rope_type": "default", "rope_theta": 10000.0}
    text = DiffusionGemmaTextConfig(
        vocab_size=q.vocab_size, hidden_size=q.hidden_size, intermediate_size=q.intermediate_size,
        num_hidden_layers=layers, num_attention_heads=q.num_attention_heads,
        num_key_value_heads=q.num_key_value_heads, head_dim=q.head_dim, global_head_dim=q.head_dim,
        hidden_activation="silu", max_position_embeddings=512, sliding_window=512,
        layer_types=["sliding_attention"] * (layers - 1) + ["full_attention"],
        rope_parameters={"sliding_attention": dict(rope), "full_attention": dict(rope)},
        num_experts=4, top_k_experts=2, moe_intermediate_size=MOE, final_logit_softcapping=softcap,
        pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    vision = dict(model_type="gemma4_vision", hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                  num_attention_heads=1, num_key_value_heads=1, head_dim=16, position_embedding_size=64)
    return DiffusionGemmaConfig(text_config=text, vision_config=vision, canvas_length=canvas)


@torch.no_grad()
def calibrate(sdar: Qwen3ForCausalLM, tok, task, n: int, seed: int) -> dict:
    """Mean RMS per layer of SDAR's values (per head), attention outputs and MLP outputs on n training problems
    (causal forward over prompt + solution)."""
    rng, stats = random.Random(seed), {}
    H, D = sdar.config.num_attention_heads, sdar.config.head_dim

    def hook(name, per_head=False):
        def f(_m, _i, out):
            x = out.float()
            r = x.view(*x.shape[:-1], H, D).pow(2).mean(-1).sqrt() if per_head else x.pow(2).mean(-1).sqrt()
            stats.setdefault(name, []).append(r.reshape(-1, *r.shape[2:]).mean(0))
        return f
    hs = []
    for i, layer in enumerate(sdar.model.layers):
        hs += [layer.self_attn.v_proj.register_forward_hook(hook(f"v{i}", True)),
               layer.self_attn.o_proj.register_forward_hook(hook(f"attn{i}")),
               layer.mlp.register_forward_hook(hook(f"mlp{i}"))]
    for _ in range(n):
        p = task.sample(rng)
        ids = [tok.bos_token_id] + tok(p.prompt + p.solution, add_special_tokens=False).input_ids
        sdar(torch.tensor([ids]))
    for h in hs:
        h.remove()
    return {k: torch.stack(v).mean(0) for k, v in stats.items()}


@torch.no_grad()
def map_weights(sdar: Qwen3ForCausalLM, gemma: DiffusionGemmaForBlockDiffusion, stats: dict, last_attn: bool) -> None:
    q, g = sdar.model, gemma.model.decoder        # the encoder's layers, norm and embedding are tied to these
    E = q.embed_tokens.weight
    hidden = E.shape[1]
    k = 1.0 / float(E.pow(2).mean().sqrt())       # the residual stream's scale here against SDAR's
    g.embed_tokens.weight.copy_(E * k / hidden ** 0.5)     # DiffusionGemma multiplies by sqrt(hidden)
    g.norm.weight.copy_(q.norm.weight * hidden ** 0.5 / k)
    D = sdar.config.head_dim
    for i, (ql, gl) in enumerate(zip(q.layers, g.layers)):
        qa, ga = ql.self_attn, gl.self_attn
        gl.input_layernorm.weight.copy_(ql.input_layernorm.weight)
        ga.q_proj.weight.copy_(qa.q_proj.weight)
        ga.q_norm.weight.copy_(qa.q_norm.weight / D ** 0.5)
        ga.k_proj.weight.copy_(qa.k_proj.weight)
        ga.k_norm.weight.copy_(qa.k_norm.weight)
        if ga.v_proj is not None:
            ga.v_proj.weight.copy_(qa.v_proj.weight)
            v_rms = stats[f"v{i}"]                                   # (H,) DiffusionGemma's v has RMS 1
        else:
            v_rms = torch.ones(sdar.config.num_attention_heads)
        ga.o_proj.weight.copy_(qa.o_proj.weight * v_rms.repeat_interleave(D)[None])
        gl.post_attention_layernorm.weight.fill_(k * float(stats[f"attn{i}"]) * (ga.v_proj is not None or last_attn))
        gl.pre_feedforward_layernorm.weight.copy_(ql.post_attention_layernorm.weight)
        for name in ("gate_proj", "up_proj", "down_proj"):
            getattr(gl.mlp, name).weight.copy_(getattr(ql.mlp, name).weight)
        gl.post_feedforward_layernorm_1.weight.fill_(1.0)
        gl.post_feedforward_layernorm_2.weight.zero_()             # experts start silent
        gl.post_feedforward_layernorm.weight.fill_(k * float(stats[f"mlp{i}"]))
    g.self_conditioning.down_proj.weight.zero_()                   # no self-conditioning signal until trained


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", default="assets/models/unmask-tasks-small")
    ap.add_argument("--out", required=True)
    ap.add_argument("--task", default="mix")
    ap.add_argument("--canvas", type=int, default=16)
    ap.add_argument("--softcap", type=float, default=30.0)
    ap.add_argument("--calib-n", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--last-attn", type=int, default=1, help="0: the last layer's attention starts silent")
    args = ap.parse_args(argv)
    torch.manual_seed(args.seed)
    tok = AutoTokenizer.from_pretrained(args.src)
    sdar = load_sdar(args.src)
    gemma = DiffusionGemmaForBlockDiffusion(gemma_config(sdar.config, tok, args.canvas, args.softcap))
    map_weights(sdar, gemma, calibrate(sdar, tok, get_task(args.task), args.calib_n, args.seed),
                args.last_attn)
    from tools.training.train_uniform import GENERATION
    gemma.generation_config = gemma.generation_config.from_dict(
        dict(GENERATION, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id))
    gemma.save_pretrained(args.out)
    tok.save_pretrained(args.out)
    print(f"saved {args.out}: {sum(p.numel() for p in gemma.parameters())} parameters")


if __name__ == "__main__":
    main()
