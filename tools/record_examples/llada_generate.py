"""The recorder's worked example: a generate loop written as LLaDA's released ``generate.py`` writes it (whole-canvas
forwards, low-confidence remasking, semi-autoregressive blocks, optional classifier-free guidance), run on this
repository's embedded model and recorded into an Unmask trace.

    python -m tools.record_examples.llada_generate --out run.npz      # then: python app.py --trace run.npz

The loop knows nothing of Unmask: only ``main`` wraps it in a ``Recorder``. Two lines differ from the release, both
for the embedded model (an SDAR-style block-causal model): each forward passes its block-causal attention mask, and
blocks lie on the absolute grid (``P // B · B``), where that model was trained to see them.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
import torch.nn.functional as F

from engine.models import masks


def add_gumbel_noise(logits, temperature):
    """Gumbel-max sampling in float64, as the release does (temperature 0: the logits as they are)."""
    if temperature == 0:
        return logits
    logits = logits.to(torch.float64)
    noise = torch.rand_like(logits, dtype=torch.float64)
    gumbel_noise = (-torch.log(noise)) ** temperature
    return logits.exp() / gumbel_noise


def get_num_transfer_tokens(mask_index, steps):
    """How many tokens each of a block's ``steps`` commits: the masked count split evenly, the remainder first."""
    mask_num = mask_index.sum(dim=1, keepdim=True)
    base = mask_num // steps
    remainder = mask_num % steps
    num_transfer_tokens = torch.zeros(mask_num.size(0), steps, device=mask_index.device, dtype=torch.int64) + base
    for i in range(mask_num.size(0)):
        num_transfer_tokens[i, :remainder[i]] += 1
    return num_transfer_tokens


def block_causal_mask(n: int, block_length: int, device):
    """(1, 1, n, n) the embedded model's attention: a position sees every block up to its own."""
    pos = torch.arange(n)
    return masks.to_backend(masks.block_causal(pos, pos, block_length), "sdpa", torch.float32, device)


@torch.no_grad()
def generate(model, prompt, steps=8, gen_length=16, block_length=4, temperature=0., cfg_scale=0.,
             remasking="low_confidence", mask_id=3, attention_mask=None, grid=True):
    """prompt (1, P) -> (1, P + gen_length): LLaDA's loop. ``attention_mask``: passed to every forward (the
    embedded model's block-causal mask); ``grid``: blocks on the absolute grid (else from the prompt's end)."""
    x = torch.full((1, prompt.shape[1] + gen_length), mask_id, dtype=torch.long, device=model.device)
    x[:, :prompt.shape[1]] = prompt.clone()
    prompt_index = x != mask_id
    P, n = prompt.shape[1], x.shape[1]
    first = P // block_length * block_length if grid else P
    starts = list(range(first, n, block_length))
    steps = steps // len(starts)
    for start in starts:
        end = min(start + block_length, n)
        block_mask_index = x[:, start:end] == mask_id
        num_transfer_tokens = get_num_transfer_tokens(block_mask_index, steps)
        for i in range(steps):
            mask_index = x == mask_id
            if cfg_scale > 0.:
                un_x = x.clone()
                un_x[prompt_index] = mask_id
                x_ = torch.cat([x, un_x], dim=0)
                am = None if attention_mask is None else attention_mask.expand(2, -1, -1, -1)
                logits = model(x_, attention_mask=am).logits
                logits, un_logits = torch.chunk(logits, 2, dim=0)
                logits = un_logits + (cfg_scale + 1) * (logits - un_logits)
            else:
                logits = model(x, attention_mask=attention_mask).logits
            logits_with_noise = add_gumbel_noise(logits, temperature=temperature)
            x0 = torch.argmax(logits_with_noise, dim=-1)                          # (1, n)
            if remasking == "low_confidence":
                p = F.softmax(logits.to(torch.float64), dim=-1)
                x0_p = torch.squeeze(torch.gather(p, dim=-1, index=torch.unsqueeze(x0, -1)), -1)
            elif remasking == "random":
                x0_p = torch.rand((x0.shape[0], x0.shape[1]), device=x0.device)
            else:
                raise NotImplementedError(remasking)
            x0_p[:, end:] = -np.inf
            x0 = torch.where(mask_index, x0, x)
            confidence = torch.where(mask_index, x0_p, -np.inf)
            transfer_index = torch.zeros_like(x0, dtype=torch.bool, device=x0.device)
            for j in range(confidence.shape[0]):
                _, select_index = torch.topk(confidence[j], k=num_transfer_tokens[j, i])
                transfer_index[j, select_index] = True
            x[transfer_index] = x0[transfer_index]
    return x


def main(argv=None) -> None:
    from engine.models.model import load_model
    from engine.record import Recorder
    from engine.tasks import get_task

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="run.npz")
    ap.add_argument("--model", default="tiny", help="an embedded model (default: unmask-arith-tiny)")
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--gen-length", type=int, default=16)
    ap.add_argument("--block-length", type=int, default=4)
    ap.add_argument("--prompt", default=None, help="default: a held-out arithmetic problem")
    ap.add_argument("--plain", action="store_true", help="no Recorder: decode and print the text, as a script "
                    "knowing nothing of Unmask does (python -m engine record records it from outside)")
    a = ap.parse_args(argv)
    adapter = load_model(a.model, device="cpu")
    text = a.prompt or get_task("arith").problems("test", 1, seed=5)[0].prompt
    prompt = torch.tensor([adapter.encode_prompt(text)])
    n = prompt.shape[1] + a.gen_length
    settings = dict(steps=a.steps, gen_length=a.gen_length, block_length=a.block_length)
    am = block_causal_mask(n, a.block_length, adapter.device)
    if a.plain:
        out = generate(adapter.model, prompt, mask_id=adapter.mask_token_id, attention_mask=am, **settings)
        print(adapter.tokenizer.batch_decode(out[:, prompt.shape[1]:], skip_special_tokens=True)[0])
        return
    with Recorder(adapter.model, adapter.mask_token_id, prompt.shape[1], adapter.tokenizer,
                  block_size=a.block_length, name=adapter.name, loop="llada_generate", args=settings) as rec:
        out = generate(adapter.model, prompt, mask_id=adapter.mask_token_id, attention_mask=am, **settings)
        rec.finish(out)
    tr = rec.save(a.out)
    print(f"{a.out}: {tr.nfe} forwards, {tr.meta.generated_tokens} tokens: {tr.meta.text!r}")


if __name__ == "__main__":
    main()
