"""The guided tour: stops that each load a pre-baked run, open the tab they speak of, move the step slider, and
point at one view (scrolled into sight and outlined), with their text in a card pinned on screen beside it.

Within one run the stops go forward in steps. Every mark a stop names is drawn in the colour and shape it says.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Callable

import gradio as gr

from engine.catalogue.cards import VerifyFields
from engine.records.trace import own_records
from explorer.page.context import Page, shown_error


@dataclass(frozen=True)
class Stop:
    title: str
    body: str
    example: str                 # the pre-baked example it shows (assets/examples/<name>.npz)
    tab: str                     # the view tab it opens
    target: str                  # elem_id of the view it points at
    step: Callable               # trace -> 1-based slider step
    branch: str = ""             # a pre-baked branch of the example, shown in the Branch tab
    text: bool = False           # its words point at the text: the card carries a copy of it at the stop's step


def s2d2_steps(trace) -> list[int]:
    """Increasing 1-based steps of an S2D2 trace for its five stops: the start, the draft before a verify (the
    first one that rejects, if any, at step ≥ 3), that verify, the first multi-token commit after it, the end."""
    recs, n = trace.records, len(trace.records)
    verifies = [i for i, r in enumerate(recs) if r.kind == "verify" and i >= 2]
    verify = ([i for i in rejecting(trace) if i >= 2] or verifies or [min(2, n - 1)])[0]
    commit = next((i for i, r in enumerate(recs) if i > verify and r.n_committed > 1), min(verify + 1, n - 1))
    return [1, verify, verify + 1, commit + 1, n]


def revision_step(trace) -> int:
    """The 1-based step of the first revision in a trace (the last step if none)."""
    changes = trace.revisions()
    return changes[0][0] + 1 if changes else len(trace.records)


def canvas_step(trace) -> int:
    """The 1-based step at which a uniform decode first kept half of its canvas (its middle step if never)."""
    half = [t for t, r in enumerate(trace.records) if r.kind == "draft" and r.committed.mean() >= 0.5]
    return (half[0] if half else len(trace.records) // 2) + 1


def rejecting(trace) -> list[int]:
    """0-based indices of the verify forwards that rejected a draft."""
    return [i for i, _, f in own_records(trace, VerifyFields) if f.rejected_at is not None]


def first_rejection(trace) -> int:
    """The 1-based step of the first verify forward that rejected a draft (the last step if none)."""
    return next((i + 1 for i in rejecting(trace)), len(trace.records))


def nth(k: int) -> Callable:
    return lambda trace: s2d2_steps(trace)[k]


STOPS = (
    Stop("Prompt and blocks", "The answer area starts fully **masked** (grey in the mask map, ▢ in the text). It "
         "is cut into **blocks** of B positions; the dotted lines in the maps are block boundaries. Blocks are "
         "decoded left to right; inside a block, positions are filled in parallel.",
         "s2d2", "Decode", "mask-plot", nth(0), text=True),
    Stop("Draft", "Each row of a map is one **forward**. A *draft* forward proposes a token for every masked "
         "position of the block (faded in the text view); the confidence map shows how sure the model is of each "
         "proposal: yellow is sure, dark blue unsure.",
         "s2d2", "Decode", "conf-plot", nth(1), text=True),
    Stop("Verify", "S2D2 then spends one more forward to **verify** the first masked span with the same model in "
         "autoregressive mode. In the verifier map, green cells were accepted; a red cell was rejected and "
         "resampled, and the draft after it is thrown away.",
         "s2d2", "S2D2", "verifier-plot", nth(2)),
    Stop("Commit", "Tokens that were accepted, or whose confidence clears τ, are **committed** (orange in the mask "
         "map, outlined in orange in the text) and kept. The commit-reason map says which rule took each token.",
         "s2d2", "Decode", "reason-plot", nth(3), text=True),
    Stop("Speed and quality", "The cards count forwards (NFE) and tokens per forward (TPF). Move τ, B or the "
         "router's cost c and release: more tokens per forward is faster, but commits made while unsure can be "
         "wrong, and the checker says so.",
         "s2d2", "Decode", "summary", nth(4)),
    Stop("When the verifier says no", "Another S2D2 decode, set to commit boldly: picks at T = 1, B = 16, τ 0.3, "
         "every draft verified with the stricter acceptance min(1, (q/p)²). The parallel draft wrote items that "
         "break the list's rules; the verifier, reading them autoregressively, rejected one (a red cell in the "
         "verifier map) and resampled it, and the rest of that span waited for the next draft. On 300 such "
         "problems this setting rejects 6.5 % of the drafts it examines and is right on 0.89, against 0.72 for the "
         "same rule unverified.", "s2d2_picks", "S2D2", "verifier-plot", first_rejection),
    Stop("Copy: a line in one forward", "Another embedded model, trained by this repository on **ParallelBench**'s "
         "tasks (`unmask-parallel-small`). Asked to **copy** a line of names, the threshold rule at τ 0.15 fills "
         "the whole answer in one forward, and the copy is right: every slot's distribution sits on one name "
         "(the confidence map is bright), so drawing the slots independently loses nothing.",
         "parallel_copy", "Decode", "conf-plot", lambda trace: len(trace.records)),
    Stop("Shuffle: where parallel decoding must fail", "The same names, the same rule and τ, asked to **shuffle** "
         "them. Each slot's distribution is now spread over every name (the confidence map is dark), and slots "
         "filled in one forward are drawn from their own distributions, independently: nothing stops two of them "
         "from taking the same name, and the answer repeats one (the checker says wrong). A permutation needs each "
         "slot to know the others' picks, which independent marginals cannot carry; one slot a forward would be "
         "right. A threshold rule cannot tell this task from the copy: that is ParallelBench's point.",
         "parallel_shuffle", "Decode", "conf-plot", lambda trace: len(trace.records)),
    Stop("Noise into an answer", "Another model, another kind of diffusion: **DiffusionGemma's uniform-noise "
         "canvas** (`uniform`, on the embedded `unmask-uniform-small`). The canvas starts as random tokens "
         "(struck-through grey in the text), not [MASK]s. Each step samples every slot, keeps the lowest-entropy "
         "samples while Σ H − max H stays within γ (green in the map) and replaces the rest with fresh noise; this "
         "is the first step at which half of the canvas was kept.",
         "uniform", "Canvas", "canvas-plot", canvas_step, text=True),
    Stop("A change of mind", "Another decode, with **token editing** (`edit`): a block filled its last slots in "
         "one forward and wrote *{old}*, which contradicts the rest of the story. A later forward of the same "
         "block looks at it again; the model now prefers *{new}* with p > τ_edit, so the token is rewritten: a "
         "purple diamond on the mask map (hover it for old → new), and in the text the old word struck through "
         "before the new one, outlined in purple. No extra forward was spent.",
         "edit", "Decode", "mask-plot", revision_step, text=True),
    Stop("Take the wheel", "What if the model had written something else? **Branch here** (under the step "
         "slider) rewound the opening story to this step, forced an unlikely candidate into its first masked slot, "
         "and let token editing (`edit`) decode on from there. The Branch tab shows both futures: the texts with "
         "the words where they part marked, and both mask maps with their shared steps shaded. Try it on any run: "
         "force a candidate, or change the decoder from a step on.",
         "threshold", "Decode", "branch-out", lambda trace: len(trace.records) // 2, branch="branch_edit"),
)
TOUR = [(s.title, s.body) for s in STOPS]


def first_revision(trace) -> dict:
    """The words of the trace's first revision ({old}, {new} in a stop's text)."""
    revisions = trace.revisions()
    if not revisions:
        return dict(old="a word", new="another")
    _, _, _, old, new = revisions[0]
    return dict(old=trace.token_str(int(old)), new=trace.token_str(int(new)))


def card_html(i: int, stop: Stop, trace) -> str:
    """The pinned card: the stop's text (with the words of its run), a copy of the run's text at the stop's step
    when its words point at it (the text view itself is above the view the stop shows, out of sight on a
    projector), and which view it points at (read by the page's tour script)."""
    from explorer.glossary import inline_markdown
    from explorer.views.text import render_text
    body = stop.body.format(**first_revision(trace)) if "{old}" in stop.body else stop.body
    # it scrolls on a phone: focusable, so a keyboard scrolls it too (axe's scrollable-region-focusable)
    copy = (f"<div class='um-tour-text' tabindex='0' aria-label='the text at this step'>"
            f"{render_text(trace, stop.step(trace) - 1)}</div>") if stop.text else ""
    return (f"<div class='um-tour' data-target='{html.escape(stop.target)}' data-stop='{i}'>"
            f"<b>{i + 1}/{len(STOPS)} · {html.escape(stop.title)}</b><div>{inline_markdown(body)}</div>{copy}</div>")


# after a stop is shown: scroll its view into sight below the card, outline it (and nothing else)
POINT_JS = """() => { setTimeout(() => {
  const card = document.querySelector('#tour-card .um-tour'); if (!card) return;
  document.querySelectorAll('.um-tour-target').forEach(e => e.classList.remove('um-tour-target'));
  const el = document.getElementById(card.dataset.target); if (!el) return;
  el.classList.add('um-tour-target');
  window.scrollTo({top: Math.max(0, el.getBoundingClientRect().top + window.scrollY - 16), behavior: 'instant'});
}, 150); }"""


def build_tour():
    """The card (hidden until the tour starts) with its buttons."""
    with gr.Column(visible=False, elem_id="tour-card") as card:
        text = gr.HTML(elem_id="tour-text")
        with gr.Row():
            back = gr.Button("◀ Back", size="sm", elem_id="tour-back")
            nxt = gr.Button("Next stop ▶", size="sm", elem_id="tour-next", variant="primary")
            close = gr.Button("Close the tour", size="sm", elem_id="tour-close")
    return card, text, back, nxt, close, gr.State(-1)


def tour_stop(page: Page, i) -> tuple:
    """(stop index, card HTML, the example trace, its 1-based step, the tab to open); the tour ends on its last stop
    (Next past it stays there; it once wrapped to stop 1, which read as the tour starting over)."""
    i = min(max(i, 0), len(STOPS) - 1) if isinstance(i, int) and not isinstance(i, bool) else 0
    stop = STOPS[i]
    ex = page.example_traces.get(stop.example)
    if ex is None:
        raise shown_error(f"the tour needs the pre-baked {stop.example} example "
                          "(python -m tools.experiments.bake_examples)")
    return i, card_html(i, stop, ex), ex, stop.step(ex), stop.tab


def buttons(i: int) -> tuple:
    """Back and Next at stop i: Back does nothing at the first stop, Next says the tour ends at the last."""
    last = i >= len(STOPS) - 1
    return (gr.Button(interactive=i > 0),
            gr.Button("The last stop" if last else "Next stop ▶", interactive=not last))


def tour_next(page: Page, i) -> tuple:
    """The stop after i (the first when i is not a stop index)."""
    return tour_stop(page, i + 1 if isinstance(i, int) and not isinstance(i, bool) else 0)
