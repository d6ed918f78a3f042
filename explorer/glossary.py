"""The glossary tab and the "how to read this" notes under each view."""

from __future__ import annotations

import html
import inspect
import re

from engine.decoders.cards import cards

GLOSSARY = r"""
| term | meaning |
|---|---|
| **mask** | the `[MASK]` token: a position whose token is not decided yet |
| **block** | B consecutive positions on the absolute grid (pos // B); blocks are decoded left to right, each attending only to earlier blocks (block-causal), so finished blocks are cached exactly |
| **step** | one denoising forward of the current block; every forward counts in **NFE** |
| **commit** | writing a token into a masked position for good |
| **confidence** | top-1 probability of a position's candidate; **margin** = top-1 − top-2; **entropy** normalised by ln V |
| **TPF** | tokens per forward = generated tokens / NFE; autoregressive decoding has TPF = 1 |
| **threshold (Fast-dLLM)** | commit every masked token with confidence ≥ τ, and at least the most confident one |
| **LLaDA fixed steps** | each block gets `steps` forwards; each commits its share of the most confident tokens |
| **draft** | S2D2: the ordinary block-diffusion forward, proposing a token at every masked position |
| **verify** | S2D2: one extra forward of the same model in block-size-1 (AR) mode through the 2L mask |
| **span** | the first contiguous run of masked positions; only it can be verified |
| **accept / reject / resample** | a draft x̂ is kept with probability min(1, (q/p)^γ) (γ = 1: exact speculative sampling); at the first rejection a token is drawn from max(q − p, 0) and the rest of the span waits |
| **estimator α** | a cheap guess of a draft's acceptance chance: exp(−β·H̃), margin, … |
| **K̂** | expected accepted tokens Σ_k Π_{i≤k} α_i |
| **router** | decides whether verifying is worth its cost: score s = K̂ − c (static) or K̂ − c·N_hi (dynamic), thresholds, hysteresis, or a UCB bandit |
| **N_hi** | masked positions the threshold rule would commit anyway this step |
| **trajectory** | a position's confidence, entropy and candidate over the steps of its block |
| **level / velocity** | CE's Kalman state on z = logit(confidence) |
| **forecast / horizon** | the predicted z some steps ahead; the horizon grows with decoded left context, shrinks with uncertainty |
| **LCB** | lower confidence bound ẑ − κσ of the forecast; look-ahead commits when it clears logit(τ) |
| **drafter / target** | SimSD: a small model drafts the whole block in its own S steps; the large target checks every draft in one forward |
| **reveal step t** | SimSD: the drafter step at which a slot was revealed (1 = first); the target's mask copy of that slot sees the block as it was just before step t |
| **temporal mask** | SimSD's verification mask over [leftover · drafts · mask copies]: each query sees one version (token or mask) of every block position, gated by reveal steps |
| **bonus token** | SimSD: at the first rejected slot the target's own token (argmax, or a residual sample under MRS) is committed; a fully accepted draft gets none |
| **revise** | a decoder that changes its mind rewrites a token it wrote in the current block, or returns it to `[MASK]`; finished blocks stay final, so the block cache stays exact |
| **edit (τ_edit)** | LLaDA2.1's token-to-token rule: a written token is rewritten when the model prefers another with p > τ_edit; *post-block edit steps* are forwards after a block is full that only edit |
| **WINO** | wide-in, narrow-out: draft every slot with p ≥ τ_wide, re-mask a drafted token whose p falls below τ_narrow in a later forward |
| **ReMDM** | remasking diffusion: each step may send the least supported written tokens (a share η) back to `[MASK]` |
| **EB, γ** | entropy-bounded commits: the lowest-entropy slots while Σ H − max H ≤ γ, a bound on their mutual dependence (also DiffusionGemma's sampler) |
| **canvas (uniform noise)** | DiffusionGemma: a block of `canvas_length` slots that starts as random tokens, not [MASK]s; each step samples every slot, **keeps** the samples inside the entropy bound and **renoises** the rest with fresh random tokens |
| **self-conditioning** | DiffusionGemma feeds each step's (tempered) logits to the next step as a soft embedding added to the canvas's |
| **stopping test** | a canvas ends when its argmax is unchanged for `stability_threshold` steps and its mean entropy is below `confidence_threshold`, or after `max_denoising_steps` |
| **prefix / dual cache** | Fast-dLLM's approximate caches for full-attention models: a block's first forward keeps the canvas's K/V; later forwards recompute the block and what follows it (prefix) or the block alone (dual) and read the rest **stale**; the **drift** is the max \|Δ logit\| against an uncached forward |
| **sub-block** | Fast-dLLM v2: the block is decoded in sub-blocks left to right, the threshold rule inside the current one |
| **Dream's score (alg)** | which masked slots a `dream` step reveals: the best by p (maskgit_plus), by top-2 margin (topk_margin) or by minus the entropy (entropy), or at random (origin) |
| **κσ** | TSPD + CE: κ standard deviations σ of the forecast below its mean (κ = 1.64: a one-sided 95 % bound) |
| **\|C_t\|** | the number of tokens committed at step t (the commit set C_t) |
| **2L** | the verifier's layout: the block's L positions twice, once as drafted tokens and once as masks, so one forward scores every draft autoregressively |
| **word piece (##)** | a token that continues the previous one (WordPiece's "##4" after "1" reads "14"); the text view joins them |
| **noise / kept** | on a uniform canvas a slot holds a random token (noise, struck-through grey in the text) until the entropy bound keeps its sample |
| **PROPOSED** | TSPD + CE details reconstructed by this project: the horizon rule's inputs and the feature families come from the paper, the formulas are ours |
"""

GLOSSARY += "".join(f"| **{term}** | {meaning} |\n" for c in cards().values() for term, meaning in c.glossary)


def how_to_read(module) -> str:
    """The "How to read" paragraph of a view module's docstring."""
    doc = inspect.getdoc(module) or ""
    for para in doc.split("\n\n"):
        if para.startswith("How to read"):
            return " ".join(para.split())
    return ""


def inline_markdown(text: str) -> str:
    """**bold**, *italic* and `code` of our own texts as HTML, everything else escaped."""
    out = html.escape(text, quote=False)
    out = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)
    out = re.sub(r"`(.+?)`", r"<code>\1</code>", out)
    return re.sub(r"\*(.+?)\*", r"<i>\1</i>", out)
