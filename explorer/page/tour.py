"""The guided tour: a walk through one pre-baked S2D2 decode, each stop moving the step slider and explaining it."""

from __future__ import annotations

import gradio as gr

from explorer.page.context import Page, shown_error

TOUR = [
    ("Prompt and blocks", "The answer area starts fully **masked** (grey). It is cut into **blocks** of B positions "
     "on the absolute grid; the dotted lines in the heatmaps are block boundaries. Blocks are decoded left to "
     "right; inside a block, positions are filled in parallel."),
    ("Draft", "Each row of the heatmaps is one **forward**. A *draft* forward proposes a token for every masked "
     "position of the current block; the confidence map shows how sure the model is of each proposal."),
    ("Verify", "S2D2 may then spend one more forward to **verify** the first masked span with the same model in "
     "autoregressive mode (Decode → S2D2 tab: the 2L attention mask). Green squares were accepted, red ones "
     "rejected and resampled."),
    ("Commit", "Tokens that are accepted, or whose confidence clears τ, are **committed** (orange in the mask "
     "map) and never change again. The commit-reason map says which rule took each token."),
    ("Speed and quality", "The cards count forwards (NFE) and tokens per forward (TPF). Move τ, B or the router's "
     "cost c and run again: more tokens per forward is faster, but commits made while unsure can be wrong."),
    ("Noise into an answer", "Another model, another kind of diffusion: **DiffusionGemma's uniform-noise canvas** "
     "(`uniform`, on the embedded `unmask-uniform-small`). The canvas starts as random tokens, not [MASK]s. Each "
     "step samples every slot, keeps the lowest-entropy samples while Σ H − max H stays within the bound γ (green in "
     "the Canvas tab's map) and replaces the rest with fresh noise (grey); the step's logits are fed back to the next "
     "one. This stop is the first step at which the model kept half of the canvas; scrub on to see it settle and "
     "the stopping test (stable argmax, low mean entropy) end it."),
    ("A change of mind", "Another decode, with **token editing** (`edit`): a block filled its last slots in one "
     "forward and wrote an object that contradicts the story (\"found a gold bell … took the drum home\"). The next "
     "block's first forward recomputes that block; the model now prefers *bell* with p > τ_edit, so the token is "
     "rewritten (the purple diamond on the mask map; hover it for old → new, and pick the position to see its "
     "history in the Revisions tab). No extra forward was spent."),
]
EXAMPLE_OF_STOP = ["s2d2"] * 5 + ["uniform", "edit"]      # which pre-baked example each stop shows


def tour_steps(trace) -> list[int]:
    """1-based slider steps illustrating each tour stop in an S2D2 trace: the first rejection if there is one
    (something goes wrong and is fixed), else the first verify."""
    recs = trace.records
    n = len(recs)
    verifies = [i for i, r in enumerate(recs) if r.kind == "verify"]
    rejected = [i for i in verifies if recs[i].field("rejected_at") is not None]
    verify = (rejected or verifies or [min(1, n - 1)])[0]
    draft = max(0, verify - 1)
    commit = next((i for i, r in enumerate(recs) if r.n_committed > 1), verify)
    return [1, draft + 1, verify + 1, commit + 1, n]


def build_tour():
    gr.Markdown("A guided walk through one decode (an S2D2 example): prompt → block → draft → verify → commit, "
                "then noise turning into an answer on a uniform-noise model, and a decoder that changes its mind. "
                "Each click moves the step slider and explains what you see.")
    text = gr.Markdown(elem_id="tour-text")
    button = gr.Button("Start / next stop", elem_id="tour-next")
    return text, button, gr.State(-1)


def revision_step(trace) -> int:
    """The 1-based step of the first revision in a trace (the last step if none)."""
    changes = trace.revisions()
    return changes[0][0] + 1 if changes else len(trace.records)


def canvas_step(trace) -> int:
    """The 1-based step at which a uniform decode first kept half of its canvas (its middle step if never)."""
    half = [t for t, r in enumerate(trace.records) if r.kind == "draft" and r.committed.mean() >= 0.5]
    return (half[0] if half else len(trace.records) // 2) + 1


def tour_next(page: Page, i) -> tuple:
    """(next stop's index, its text, the example trace, its 1-based step)."""
    i = (i + 1) % len(TOUR) if isinstance(i, int) and not isinstance(i, bool) else 0
    name = EXAMPLE_OF_STOP[i]
    ex = page.example_traces.get(name)
    if ex is None:
        raise shown_error(f"the tour needs the pre-baked {name} example "
                          "(python -m engine.experiments.bake_examples)")
    title, body = TOUR[i]
    s = tour_steps(ex)[i] if name == "s2d2" else canvas_step(ex) if name == "uniform" else revision_step(ex)
    return i, f"**{i + 1}/{len(TOUR)} · {title}**\n\n{body}", ex, s
