"""The uniform-noise canvas of DiffusionGemma (transformers' ``DiffusionGemmaForBlockDiffusion.generate``).

Per canvas (a block of ``canvas_length`` slots after the prompt): the encoder adds the uncached tokens (the prompt,
then the previous canvas) to its cache; the canvas starts as uniformly random ids; then for n = N .. 1 (N =
``max_denoising_steps``, n the steps *remaining*):

    logits   decoder(canvas, cache, self-conditioning = the previous step's tempered logits) / T_n,
             T_n = t_min + (t_max − t_min) · n / N
    sample   one token per slot, torch.multinomial of softmax(logits)
    accept   sort the slots by entropy H (nats, of the tempered logits), lowest first; keep the samples of the
             longest prefix with Σ H − max H ≤ γ (``EntropyBoundSampler.accept_canvas``, EB's rule)
    renoise  every other slot gets a fresh random id
    stop     when the argmax canvas equals each of the last ``stability_threshold`` ones and mean H < threshold
             (``StableAndConfidentStoppingCriteria``); the canvas's output is the last step's argmax

Random numbers are drawn from the decode's generator in the reference's order (the canvas, then per step the
sample and the noise), so a seed equal to ``torch.manual_seed`` before ``generate`` gives its tokens. Where we
chose: a canvas's first record is its encoder forward (kind "encode", the canvas as initial noise), and the last
step's record holds the output (the argmax canvas) rather than the discarded renoised one.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from engine.catalogue.catalogue import config_class, settle
from engine.errors import ConfigError
from engine.runtime.loop import BlockContext, Policy
from engine.runtime.device import read, to_device
from engine.runtime.sampling import TOP_K, TokenStats, race
from engine.decoders.uniform.card import UniformFields, UniformSummary


def accept_canvas(entropy: torch.Tensor, gamma: float):
    """transformers' acceptance on (C,) entropies: (accepted (C,) bool, rank of each slot, Σ H − max H by rank)."""
    sorted_h, order = torch.sort(entropy, dim=-1, descending=False)
    bound = torch.cumsum(sorted_h, dim=-1) - sorted_h                       # sorted: h is the running maximum
    accepted = torch.zeros_like(bound, dtype=torch.bool).scatter(-1, order, bound <= gamma)
    rank = torch.empty_like(order).scatter(-1, order, torch.arange(len(order)))
    return accepted, rank, bound


class StableAndConfident:
    """The canvas may stop once its argmax equals each of the last k ones and its mean entropy is low."""

    def __init__(self, k: int, threshold: float, length: int):
        self.k, self.threshold = k, threshold
        self.history = torch.full((k, length), -1, dtype=torch.long)

    def __call__(self, argmax: torch.Tensor, entropy: torch.Tensor) -> tuple[bool, bool]:
        stable = True
        if self.k:
            stable = bool((self.history == argmax[None]).all())
            self.history = torch.roll(self.history, shifts=-1, dims=0)
            self.history[-1] = argmax
        return stable, bool(torch.mean(entropy) < self.threshold)


def entropy_nats(logits: torch.Tensor) -> torch.Tensor:
    """(C,) ``Categorical(logits=logits).entropy()``, its lines (the same numbers) without its checks of the
    logits on the host (a ``bool()`` of a device tensor: a sync)."""
    norm = logits - logits.logsumexp(dim=-1, keepdim=True)
    return -(torch.clamp(norm, min=torch.finfo(norm.dtype).min) * torch.softmax(norm, dim=-1)).sum(-1)


def canvas_top(probs: torch.Tensor) -> tuple:
    """What the record reads of the step's tempered distribution (C, V) (float32: V may be 262 144; the
    probabilities the step sampled from, not computed again): the top-2 and the top-K ids and probabilities, on
    the device."""
    top2, top = torch.topk(probs, 2, dim=-1), torch.topk(probs, min(TOP_K, probs.shape[-1]), dim=-1)
    return top2.indices, top2.values, top.indices, top.values


def canvas_stats(probs: torch.Tensor, entropy: torch.Tensor, ids, p, top_ids, top_p) -> TokenStats:
    """The record's per-slot statistics from ``canvas_top``, read."""
    return TokenStats(ids[:, 0], p[:, 0], p[:, 0] - p[:, 1], entropy / math.log(probs.shape[-1]), probs, ids[:, 0],
                      top_ids, top_p)


class UniformPolicy(Policy):
    name = "uniform"
    config_cls = config_class("uniform")
    settles_per_block = True

    def settle(self, adapter):
        """The canvas length and, for every parameter left at 0 (−1), the checkpoint's generation config."""
        c, g = self.cfg, adapter.info["generation"]
        C = int(adapter.block_size or 0)
        if C <= 0:
            raise ConfigError(f"{adapter.name} has no canvas_length")
        given = dict(max_denoising_steps=c.max_denoising_steps, entropy_bound=c.entropy_bound, t_min=c.t_min,
                     t_max=c.t_max, confidence_threshold=c.confidence_threshold)
        model = {k: g[k] for k, v in given.items() if not v}                     # 0 = the model's
        if c.stability_threshold < 0:
            model["stability_threshold"] = g["stability_threshold"]
        return settle(c, f"{adapter.name}'s generation config", **model, block_size=C,
                      gen_length=-(-c.gen_length // C) * C)                      # whole canvases, as generate makes

    def run_block(self, ctx: BlockContext):
        r, a, c = ctx.runner, ctx.runner.adapter, self.cfg
        yield from r.encode(ctx.lo)
        V = a.vocab_size
        canvas = torch.randint(0, V, (1, ctx.L), generator=r.generator)[0]    # (C,) the reference's initial draw
        ctx.rewrite(canvas, torch.zeros(ctx.L, dtype=torch.bool))
        yield ctx.emit("encode", None)
        stop = StableAndConfident(c.stability_threshold, c.confidence_threshold, ctx.L)
        N, sc = c.max_denoising_steps, None
        for n in range(N, 0, -1):
            raw = yield from r.denoise(canvas, ctx.lo, sc)                     # (C, V) float32
            temperature = c.t_min + (c.t_max - c.t_min) * (torch.tensor(n, dtype=torch.int32) / N)
            logits = raw / to_device(temperature, raw)
            probs = torch.softmax(logits, dim=-1, dtype=torch.float32)                           # (C, V) device
            sample, argmax, entropy, *top = yield from read(                                     # the step's read
                race(probs, 1, r.device_generator)[:, 0], torch.argmax(logits, dim=-1), entropy_nats(logits),
                *canvas_top(probs))                                                              # (C,) each
            accepted, rank, bound = accept_canvas(entropy, c.entropy_bound)
            noise = torch.randint(0, V, (1, ctx.L), generator=r.generator)[0]
            new = torch.where(accepted, sample, noise)
            stable, confident = stop(argmax, entropy)
            final = (stable and confident) or n == 1
            ctx.rewrite(argmax if final else new, accepted)
            yield ctx.emit("draft", canvas_stats(probs, entropy, *top), UniformFields(
                denoised=sample.numpy().astype(np.int32), entropy_nats=entropy.numpy().astype(np.float32),
                eb_order=rank.numpy().astype(np.int32), eb_bound=bound.numpy().astype(np.float32),
                gamma=float(c.entropy_bound), temperature=float(temperature), stable=stable, confident=confident,
                mean_entropy=float(entropy.mean()), confidence_threshold=float(c.confidence_threshold)))
            if final:
                return
            canvas, sc = new, a.conditioning(logits)

    def summary(self, runner) -> UniformSummary:
        c = self.cfg
        return UniformSummary(canvas_length=c.block_size, max_denoising_steps=c.max_denoising_steps,
                              entropy_bound=c.entropy_bound, t_min=c.t_min, t_max=c.t_max,
                              stability_threshold=c.stability_threshold, confidence_threshold=c.confidence_threshold)
