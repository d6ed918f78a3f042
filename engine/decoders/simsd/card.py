"""SimSD's card (torch-free): what the decoder adds besides its rule (engine.catalogue.cards)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.catalogue.cards import BenchCounts, Card, Example, SpeculativeSummary, VerifyFields, ViewEntry
from engine.catalogue.params import COMMON, Decoder, Param


@dataclass(frozen=True)
class SimSDDraftFields:
    draft_tokens: np.ndarray      # (L,) the block as the drafter has revealed it so far ([MASK] where not yet)
    step_of: np.ndarray           # (L,) reveal step t of each drafted slot (1-based; 0 = not drafted this round)


@dataclass(frozen=True)
class SimSDVerifyFields(VerifyFields):
    """The common verify payload (attn_mask over [block | mask copies], (L + n, L + n); ratio 1 match / 0
    mismatch when greedy; p_draft the drafter's p at its reveal step), and each slot's reveal step."""
    step_of: np.ndarray           # (L,) reveal steps


@dataclass(frozen=True)
class SimSDSummary(SpeculativeSummary):
    drafter: str = ""
    target_forwards: int = 0
    draft_forwards: int = 0
    param_ratio: float = 0.0             # the drafter's parameters over the target's
    target_equiv_nfe: float | None = None   # target forwards + param_ratio × drafter forwards
    verified_tokens: int = 0
    acceptance_rate: float | None = None
    caveat: str | None = None            # a setting whose acceptance test is biased, said in the summary


def counts(trace) -> dict:
    """Forwards per model (the decoder's summary) and the records' wall times of drafter and target forwards."""
    s = trace.meta.own(SimSDSummary)
    out = dict(target_forwards=s.target_forwards, draft_forwards=s.draft_forwards, param_ratio=s.param_ratio)
    for kind in ("draft", "verify"):
        ms = [r.wall_ms for r in trace.records if r.kind == kind]
        out.update({f"{kind}_ms": sum(ms), f"{kind}_n": len(ms)})
    return out


def two_model_costs(a, done: int) -> dict:
    """Forwards per model, the drafter/target forward-time ratio measured in this run, and the target-equivalent
    NFE (drafter forwards priced at that ratio); TPF is then tokens per target-equivalent NFE."""
    if not a["target_forwards"]:
        return {}
    time_ratio = (a["draft_ms"] / max(1, a["draft_n"])) / max(1e-9, a["verify_ms"] / max(1, a["verify_n"]))
    equiv = a["target_forwards"] + time_ratio * a["draft_forwards"]
    return dict(target_forwards=a["target_forwards"] / done, draft_forwards=a["draft_forwards"] / done,
                time_ratio=time_ratio, param_ratio=a["param_ratio"] / done,
                target_equiv_nfe=equiv / done, tpf=a["tokens"] / max(1e-9, equiv),
                cost_model="drafter forwards at the measured drafter/target forward-time ratio",
                acceptance_rate=a["accepted_tokens"] / max(1, a["verified"]))


def summary_cards(meta) -> tuple[list, list]:
    """The page's summary of a SimSD run: its NFE priced in target forwards, and what that price means."""
    s = meta.own(SimSDSummary)
    if s is None or s.target_equiv_nfe is None:
        return [], []
    both = f"{s.target_forwards} target and {s.draft_forwards} drafter forwards"
    return ([("target-equiv. NFE", f"{s.target_equiv_nfe:.1f}",
              f"{both}, the drafter's priced at the parameter ratio {s.param_ratio:.3f} (the bench uses the "
              "measured time ratio)")],
            [f"SimSD runs two models: NFE counts {both} alike; target-equivalent NFE prices a drafter forward at "
             f"the parameter ratio {s.param_ratio:.3f} of a target forward (an expectation for memory-bound "
             "hardware; the bench measures the time ratio)."])


CARD = Card(
    decoder=Decoder("simsd",
        "**SimSD** two-model speculation: a small drafter denoises the block, recording when it revealed "
        "each slot; the target checks every draft in one forward through a temporal attention mask.",
        COMMON + ("drafter", "acceptance", "mask", "draft_steps", "reveal", "tau"),
        overrides={"acceptance": dict(choices=("greedy", "mrs"), default="greedy",
        help="greedy: argmax match; mrs: min(1, q/p) + residual, a bonus token (biased with a greedy "
        "drafter, temperature 0: the trace says so)")},
        needs=("block_causal", "no_shift"), knob="tau", title="SimSD: drafter and verification",
        resources=("drafter",)),
    menu=('Speculative', 'SimSD: a small drafter, the target verifies'), rank=1,
    params={
        "drafter": Param(str, "", label="Drafter", help="the small drafting model; empty = the target's paired drafter "
            "(on the page only embedded models)", group="simsd", model=True),
        "mask": Param(str, "released", choices=("released", "simplified"), label="Verification mask",
            help="released: the temporal mask of the SimSD code; simplified: each copy sees the drafts revealed before it (an early write-up's reading)",
            group="simsd"),
        "draft_steps": Param(int, 0, 0, 64, label="Drafter steps S (0 = B)", help="drafter forwards per round", step=1,
            page=(0, 32), group="simsd"),
        "reveal": Param(str, "static", choices=("static", "dynamic"), label="Drafter reveal rule",
            help="static: top-k per step; dynamic: every c > τ if at least k", group="simsd"),
    },
    records={"draft": SimSDDraftFields, "verify": SimSDVerifyFields},
    bench=BenchCounts(counts, two_model_costs, ("target_forwards", "draft_forwards", "time_ratio", "param_ratio",
                                                "target_equiv_nfe", "tpf", "cost_model", "acceptance_rate")),
    summary=summary_cards,
    summary_type=SimSDSummary,
    views=(ViewEntry("simsd", "Reveal order and verdicts", "SimSD", "explorer.views.simsd:simsd_rounds",
                     "explorer.views.simsd", "server"),),
    shows=(SimSDDraftFields, SimSDVerifyFields),
    tab_note="The round's temporal mask is the attention view in the S2D2 tab.",
    glossary=(
        ("drafter / target", "SimSD: a small model drafts the whole block in its own S steps; the large target checks every draft in one forward"),
        ("reveal step t", "SimSD: the drafter step at which a slot was revealed (1 = first); the target's mask copy of that slot sees the block as it was just before step t"),
        ("temporal mask", "SimSD's verification mask over [leftover · drafts · mask copies]: each query sees one version (token or mask) of every block position, gated by reveal steps"),
        ("bonus token", "SimSD: at the first rejected slot the target's own token (argmax, or a residual sample under MRS) is committed; a fully accepted draft gets none"),
    ),
    example=Example(dict(block_size=8, acceptance="mrs", temperature=1.0), "story", shows="rejects"),
)
