"""ReMDM's card (torch-free): what the decoder adds besides its rule (engine.catalogue.cards)."""

from __future__ import annotations

from engine.catalogue.cards import Card, Example
from engine.catalogue.params import COMMON, Decoder, Param


CARD = Card(
    decoder=Decoder("remdm", "**ReMDM** remasking (the released remdm-cap / rescale / conf / loop samplers): S fixed "
        "steps over timesteps t = 1 … 1/S; each step draws, per slot of the block, whether a written token goes "
        "back to [MASK] (σ capped by η, scaled by η, weighted by how unsure it was when unmasked, or η inside "
        "remdm-loop's window) and whether a masked slot is filled (1/(S − j) plus the compensation for what σ "
        "re-masks), as the release's ancestral sampler does; a re-masked slot waits for a later step. Tokens are "
        "drawn from the release's nucleus (top-p keeps tokens while the running sum is at most p), conf keeps "
        "their renormalised probability, and a step that changed nothing reuses the last forward's distribution "
        "instead of running one (the release's p_x0 cache). Where we differ: the last step fills every slot left (the release ends at t = 10⁻⁵ and takes a final argmax), and "
        "only the current block can be re-masked (a finished block is final); remdm_fill=confident fills "
        "LLaDA's ⌈m/(S − j)⌉ most confident instead.",
        COMMON + ("steps", "eta", "remask", "remdm_fill", "t_on", "t_off", "alpha_on"), knob="eta",
        title="ReMDM: remasking", revises=True,
        rules=((lambda v: v["t_off"] < v["t_on"], "t_off must be below t_on"),)),
    menu=('Changes its mind', 'ReMDM: send tokens back to [MASK]'), rank=2,
    reference_defaults={   # the released scripts: remdm-cap 0.008, remdm-rescale 0.015, remdm-loop 0.02
        "eta": (0.008, "the reference's 0.008 (remdm-cap; 0.015 for rescale, 0.02 for loop) re-masks about one "
                "token in a thousand steps of its 1 024-token canvas; on a block of 8 over a few steps it would "
                "almost never act, so the page's default (0.1) makes the remasking visible; set the script's value "
                "to decode as it does"),
    },
    params={
        "eta": Param(float, 0.1, 0.0, 0.5, label="η (remasking strength)", help="remdm-cap: σ = min(η, (1 − α_s)/"
            "α_t); rescale: σ = η · min(1, (1 − α_s)/α_t); loop: σ = η inside [t_off, t_on]", step=0.01,
            group="remdm"),
        "remask": Param(str, "cap", choices=("cap", "rescale", "conf", "loop"), label="ReMDM schedule",
            help="cap: σ = min(η, (1 − α_s)/α_t); rescale: η · min(1, (1 − α_s)/α_t); conf: σ_max · softmax(−p at "
            "unmasking) over the sequence's written tokens; loop: MDLM, then η-remasking at α = α_on for t in "
            "(t_off, t_on], then MDLM (the paper's best)", group="remdm"),
        "remdm_fill": Param(str, "random", choices=("random", "confident"), label="which masked slots a step fills",
            help="random: each with probability 1/(S − j) + σ·α_t/(1 − α_t), as the release; confident: the "
            "⌈m/(S − j)⌉ most confident (Unmask's earlier rule: a block always ends in S steps)", group="remdm"),
        "t_on": Param(float, 0.55, 0.0, 1.0, open_lo=True, open_hi=True, label="t_on (loop)",
            help="remdm-loop: the remasking window starts when t falls to t_on (release: 0.55)", step=0.01,
            group="remdm"),
        "t_off": Param(float, 0.05, 0.0, 1.0, open_lo=True, open_hi=True, label="t_off (loop)",
            help="remdm-loop: the window ends at t_off (release: 0.05)", step=0.01, group="remdm"),
        "alpha_on": Param(float, 0.9, 0.0, 1.0, open_lo=True, open_hi=True, label="α_on (loop)",
            help="remdm-loop: the share unmasked, held inside the window (release: 0.9)", step=0.01,
            group="remdm"),
    },
    glossary=(
        ("ReMDM", "remasking diffusion: each step may send written tokens back to `[MASK]` (σ, set by η) and "
                  "fills masked slots at random, more of them to make up for what it re-masks"),
    ),
    example=Example(dict(block_size=8, temperature=1.0), "story", shows="revises"),
)
