"""Train the embedded uniform-noise model: a stock ``DiffusionGemmaForBlockDiffusion`` (text only) on the tasks.

DiffusionGemma decodes canvas by canvas: its encoder caches the prompt and the finished canvases (causal), its
decoder denoises a canvas of ``canvas_length`` tokens that starts as uniformly random ids. Training follows that:
each row is one (context, canvas) pair, where the context is the prompt plus the answer's earlier canvases and the
canvas is the answer's next ``canvas_length`` tokens ([EOS], then [PAD] after it).

    noise      t ~ U(0, 1]; each canvas slot is replaced by a uniformly random id with probability t
    loss       cross-entropy of the clean token at every canvas slot (the decoder must tell noise from signal)
    self-cond  a first pass without self-conditioning gives logits; the second pass takes them
               (``self_conditioning_logits``, divided by a temperature drawn from the decoder's [t_min, t_max]) on
               a share ``--sc`` of the rows (``self_conditioning_mask``), as the decoder feeds each step's logits
               to the next

    OMP_NUM_THREADS=1 nohup python -m tools.training.train_uniform --out runs/uniform --task mix --minutes 100 &

Resumable (re-run the same command: weights, optimiser, step and consumed time come back from ckpt.pt); the batch
of step s is a function of (seed, s). The exported model lands in <out>/model.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import (DiffusionGemmaConfig, DiffusionGemmaForBlockDiffusion, DiffusionGemmaTextConfig,
                          DynamicCache)

from engine.tasks.common import split_of
from tools.training.train import checkpoint, checkpoint_every, lr_at, open_run, optimise, resume, write_records

# the decoder's defaults for this model (its generation_config.json); DiffusionGemma's own are 48 / 0.1 / 0.4 / 0.8
GENERATION = dict(max_denoising_steps=24, t_min=0.4, t_max=0.8, stability_threshold=1, confidence_threshold=0.005,
                  sampler_config={"entropy_bound": 0.1, "_cls_name": "EntropyBoundSamplerConfig"})


def model_config(tok, layers: int, hidden: int, canvas: int) -> DiffusionGemmaConfig:
    """A few-million-parameter DiffusionGemma: the stock layer (dense MLP + 4 experts, top 2), sliding layers with
    a full last layer, and a one-layer vision tower of width 16 (the stock class always builds one; text prompts
    never run it)."""
    heads = max(1, hidden // 64)
    text = DiffusionGemmaTextConfig(
        vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=heads, head_dim=64, global_head_dim=64,
        max_position_embeddings=512, sliding_window=128,
        layer_types=["sliding_attention"] * (layers - 1) + ["full_attention"], num_experts=4, top_k_experts=2,
        moe_intermediate_size=hidden, pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id)
    vision = dict(model_type="gemma4_vision", hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                  num_attention_heads=1, num_key_value_heads=1, head_dim=16, position_embedding_size=64)
    return DiffusionGemmaConfig(text_config=text, vision_config=vision, canvas_length=canvas)


def make_row(tok, problem, canvas: int, rng: random.Random) -> tuple[list[int], list[int]]:
    """(context ids, clean canvas ids) for one of the answer's canvases, drawn uniformly."""
    prompt = [tok.bos_token_id] + tok(problem.prompt, add_special_tokens=False).input_ids
    answer = tok(problem.solution, add_special_tokens=False).input_ids + [tok.eos_token_id]
    c = rng.randrange(-(-len(answer) // canvas))
    clean = answer[c * canvas:(c + 1) * canvas]
    return prompt + answer[:c * canvas], clean + [tok.pad_token_id] * (canvas - len(clean))


def batch_of(tok, task, args, step: int) -> tuple[torch.Tensor, ...]:
    """The step's batch: context (n, T) right-padded with its mask, clean and noised canvases (n, C), positions."""
    rng = random.Random(f"{args.seed}/{step}")
    rows = []
    while len(rows) < args.batch:
        prob = task.sample(rng)
        if split_of(prob.prompt) == "train":
            rows.append(make_row(tok, prob, args.canvas, rng))
    T = max(len(c) for c, _ in rows)
    ctx = torch.full((len(rows), T), tok.pad_token_id, dtype=torch.long)
    ctx_mask = torch.zeros(len(rows), T, dtype=torch.bool)
    for i, (c, _) in enumerate(rows):
        ctx[i, :len(c)], ctx_mask[i, :len(c)] = torch.tensor(c), True
    clean = torch.tensor([x for _, x in rows])                                   # (n, C)
    g = torch.Generator().manual_seed(rng.randrange(1 << 62))
    t = torch.rand(len(rows), 1, generator=g).clamp_min(1e-3)                    # (n, 1) noise level
    noise = torch.randint(0, len(tok), clean.shape, generator=g)
    noisy = torch.where(torch.rand(clean.shape, generator=g) < t, noise, clean)
    sc_rows = torch.rand(len(rows), generator=g) < args.sc
    sc_temp = args.t_lo + (args.t_hi - args.t_lo) * torch.rand(len(rows), 1, 1, generator=g)
    dec_pos = ctx_mask.sum(1, keepdim=True) + torch.arange(args.canvas)[None]    # (n, C)
    return ctx, ctx_mask, clean, noisy, dec_pos, sc_rows, sc_temp


def loss_of(model, batch) -> tuple[torch.Tensor, float]:
    ctx, ctx_mask, clean, noisy, dec_pos, sc_rows, sc_temp = batch
    cache = DynamicCache(config=model.config.get_text_config(decoder=True))
    enc = model.model.encoder(input_ids=ctx, attention_mask=ctx_mask, cache=cache,
                              position_ids=torch.arange(ctx.shape[1])[None].expand_as(ctx))
    dec_mask = torch.cat([ctx_mask, torch.ones_like(noisy, dtype=torch.bool)], 1)   # (n, T + C)
    kw = dict(decoder_input_ids=noisy, cache=enc.cache, decoder_attention_mask=dec_mask, decoder_position_ids=dec_pos)
    sc = None
    if sc_rows.any():
        with torch.no_grad():
            sc = model(**kw).logits / sc_temp                                    # (n, C, V)
    logits = model(**kw, self_conditioning_logits=sc, self_conditioning_mask=sc_rows if sc is not None else None).logits
    loss = F.cross_entropy(logits.flatten(0, 1), clean.flatten())
    return loss, (logits.argmax(-1) == clean).float().mean().item()


@torch.no_grad()
def evaluate(model, tok, problems, task, seed: int) -> dict:
    """Accuracy per task under the model's own ``generate`` (its generation config), one seed per problem."""
    model.eval()
    hits: dict[str, list[bool]] = {}
    for i, prob in enumerate(problems):
        ids = [tok.bos_token_id] + tok(prob.prompt, add_special_tokens=False).input_ids
        torch.manual_seed(seed + i)
        out = model.generate(torch.tensor([ids]), max_new_tokens=64).sequences[0, len(ids):].tolist()
        if tok.eos_token_id in out:
            out = out[:out.index(tok.eos_token_id)]
        hits.setdefault(prob.task, []).append(task.check(tok.decode(out, skip_special_tokens=True), prob))
    model.train()
    return {k: round(sum(v) / len(v), 3) for k, v in sorted(hits.items())}


def setup(args, tok):
    torch.manual_seed(args.seed)
    if args.init:
        # the init's own architecture (e.g. unmask-tasks-small's, mapped by uniform_from_sdar) and weights, through
        # the stock loader: the file keeps the encoder/decoder weights once (tied), the state dict twice
        model = DiffusionGemmaForBlockDiffusion.from_pretrained(args.init)
        model.config.canvas_length = args.canvas
    else:
        model = DiffusionGemmaForBlockDiffusion(model_config(tok, args.layers, args.hidden, args.canvas))
    model.generation_config = model.generation_config.from_dict(
        dict(copy.deepcopy(GENERATION), eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.98), weight_decay=0.01)
    if (at := resume(model, opt, Path(args.out))) is not None:
        return model, opt, *at
    return model, opt, 0, 0.0


def export(model, tok, out: Path, meta: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)          # config.json (model_type diffusion_gemma), generation_config.json, weights
    tok.save_pretrained(out)
    cfg = json.loads((out / "config.json").read_text())
    cfg["unmask"] = meta
    (out / "config.json").write_text(json.dumps(cfg, indent=2))


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--task", default="mix")
    ap.add_argument("--weights", default="", help="a mix task's shares, e.g. arith=0.5,story=0.25,picks=0.25")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=192)
    ap.add_argument("--canvas", type=int, default=16, help="canvas_length: tokens denoised together")
    ap.add_argument("--init", default="", help="start from this model directory's weights (same layers and width; "
                    "the canvas length may differ: no weight depends on it)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--sc", type=float, default=0.5, help="share of rows trained with self-conditioning")
    ap.add_argument("--t-lo", type=float, default=0.4, help="self-conditioning temperature range (the decoder's)")
    ap.add_argument("--t-hi", type=float, default=0.8)
    ap.add_argument("--minutes", type=float, default=100.0, help="wall-clock budget; the cosine decay spans it")
    ap.add_argument("--max-steps", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--eval-every", type=int, default=500)
    ap.add_argument("--eval-n", type=int, default=40)
    ap.add_argument("--log-every", type=int, default=50)
    return ap.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    out, task, tok, model, opt, step, elapsed, val, log = open_run(args, setup)
    n_params = sum(p.numel() for p in model.parameters())
    t0, last_save, window = time.time() - elapsed, time.time(), []
    model.train()
    while (elapsed := time.time() - t0) <= args.minutes * 60 and not (args.max_steps and step >= args.max_steps):
        loss, acc = loss_of(model, batch_of(tok, task, args, step))
        optimise(model, opt, loss, lr_at(elapsed / (args.minutes * 60), step, args.lr, args.warmup))
        step += 1
        window.append((loss.item(), acc))
        recs = []
        if step % args.log_every == 0:
            recs.append(dict(step=step, wall_s=round(elapsed, 1),
                             loss=round(sum(w[0] for w in window) / len(window), 4),
                             token_acc=round(sum(w[1] for w in window) / len(window), 3)))
            window.clear()
        if step % args.eval_every == 0:
            recs.append(dict(step=step, val_acc=evaluate(model, tok, val, task, args.seed), n=len(val)))
        write_records(log, recs)
        last_save = checkpoint_every(last_save, model, opt, step, elapsed, out)
    checkpoint(model, opt, step, elapsed, out)
    model.eval()
    text = model.config.get_text_config()
    meta = dict(task=args.task, weights=args.weights or None, init=args.init or None, layers=text.num_hidden_layers,
                hidden=text.hidden_size, canvas=args.canvas,
                params=n_params,
                steps=step, train_seconds=round(elapsed), batch=args.batch, lr=args.lr, sc=args.sc, seed=args.seed,
                objective="uniform noise (t ~ U(0,1], random ids), self-conditioning")
    export(model, tok, out / "model", meta)
    print(f"saved {out / 'model'} after {step} steps, {elapsed:.0f}s", flush=True)


if __name__ == "__main__":
    main()
