"""The pre-baked examples as the page shows them: real token strings among every candidate, and an opening run
whose dial visibly matters."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine.catalogue import catalogue
from engine.records.trace import Trace

EXAMPLES = Path(__file__).resolve().parent.parent / "assets" / "examples"


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.npz")), ids=lambda p: p.stem)
def test_every_candidate_of_a_prebaked_example_has_its_string(path):
    tr = Trace.load(path)
    ids = {int(t) for r in tr.records if r.field("topk_ids") is not None for t in np.unique(r.field("topk_ids"))}
    assert ids and all(str(t) in tr.meta.vocab for t in ids if t >= 0)


def test_a_decode_carries_the_strings_of_its_top5():
    """The candidates panel needs the string of every top-5 id, not only of committed tokens."""
    from engine.decoders import build_decoder
    from engine.runtime.loop import Generation
    from engine.models.model import load_model
    tr = Generation(load_model("unmask-tasks-small"), "Tell a story about a shy fox named Leo.",
                    build_decoder("threshold", temperature=1.0, gen_length=32)).run()
    top = {int(t) for r in tr.records if r.field("topk_ids") is not None for t in r.field("topk_ids").ravel()}
    committed = set(tr.meta.final_tokens)
    assert top - committed and all(str(t) in tr.meta.vocab for t in top)


def test_the_opening_examples_dial_changes_its_outcome():
    """The page opens on the threshold example; moving τ to the other end of its page range changes the text,
    or NFE by at least a quarter."""
    from engine.decoders import build_decoder
    from engine.runtime.loop import Generation
    from engine.models.model import load_model
    opener = Trace.load(EXAMPLES / "threshold.npz")
    params = dict(opener.meta.params)
    lo, _ = catalogue.PARAMS["tau"].page
    params["tau"] = round(lo + catalogue.PARAMS["tau"].step, 2)      # the slider's low end (τ's range is open at 0)
    other = Generation(load_model("unmask-tasks-small"), opener.meta.prompt,
                       build_decoder("threshold", **params)).run()
    assert other.meta.text != opener.meta.text or abs(other.nfe - opener.nfe) >= 0.25 * opener.nfe


def test_lowering_tau_on_the_opening_example_marks_cells_at_many_forwards():
    """The page opens on the threshold example: its τ preview marks nothing at the run's own τ (every cell that
    cleared it was committed) and, dragged to 0.85, at least 20 cells at 10 or more forwards (at τ 0.9 the opening
    story marked none down to 0.55: this model's waiting cells were all below 0.5)."""
    from explorer.scrub import payload, would_pass_tau
    opener = Trace.load(EXAMPLES / "threshold.npz")
    d = payload(opener)
    assert would_pass_tau(d, opener.meta.params["tau"]) == []
    lowered = would_pass_tau(d, 0.85)
    assert len(lowered) >= 20 and len({s for s, _ in lowered}) >= 10, lowered


def test_each_decoders_card_describes_its_shipped_example():
    """A decoder's example lives on its card (``Example``): the shipped trace was decoded with the card's setting,
    on its model, from its task, and the bake knows what the card asks it to show."""
    from engine.catalogue.cards import cards
    from explorer.page.examples import held_out
    from tools.experiments.bake_examples import SHOWS
    examples = {n: c.example for n, c in cards().items() if c.example}
    assert {"threshold", "llada", "ar", "s2d2", "simsd", "tspd", "edit", "uniform"} <= set(examples)
    for name, ex in examples.items():
        tr = Trace.load(EXAMPLES / f"{name}.npz")
        assert tr.meta.decoder == name and ex.shows in SHOWS, name
        assert all(tr.meta.params[k] == v for k, v in ex.setting.items()), (name, ex.setting, tr.meta.params)
        assert tr.meta.model == (ex.model or "unmask-tasks-small"), name
        # one of the held-out problems the page offers, so the checker knows it (a link to it has a checker tile)
        prompts = {p.typed for _, p in held_out("mix") if p.task == ex.task}
        assert tr.meta.prompt in prompts, name


def test_the_wino_example_re_masks():
    """WINO's example narrows out: its verify step sends at least one drafted token back to [MASK] (the shipped
    run at the defaults re-masked nothing at any of its 21 steps, so half of its view was empty)."""
    from engine.decoders.wino.card import WinoFields
    from engine.records.trace import Revision, own_records
    tr = Trace.load(EXAMPLES / "wino.npz")
    rejected = [f.rejected for _, _, f in own_records(tr, WinoFields)]
    assert len(rejected) == len(tr.records) and sum(rejected) >= 1, rejected
    remasks = [r for r in tr.revisions() if r[2] == int(Revision.WINO_REJECT)]
    assert len(remasks) == sum(rejected) and all(new == tr.meta.mask_token_id for *_, new in remasks)


def test_a_finished_uniform_canvas_reads_as_its_answer_not_as_revisions():
    """A canvas slot holds noise until it is kept: the noise's replacement is the commit, not a change of mind, so
    the finished uniform run's text has no struck-through chips; an edit that rewrote a written token still has."""
    from explorer.views.text import render_text
    uniform, edit = (Trace.load(EXAMPLES / f"{n}.npz") for n in ("uniform", "edit"))
    assert "um-rev" not in render_text(uniform) and "um-new" in render_text(uniform)
    assert render_text(edit, edit.revisions()[0][0]).count("um-rev") >= 1


def test_the_canvas_map_prints_tokens_in_its_cells_only_while_they_fit():
    from explorer.views import canvas
    tr = Trace.load(EXAMPLES / "uniform.npz")
    (heat,) = [t for t in canvas.canvas_map(tr).data if t.type == "heatmap"]
    assert heat.texttemplate == "%{text}" and len(heat.x) <= canvas.MAX_LABELLED
    wide = canvas.MAX_LABELLED
    try:
        canvas.MAX_LABELLED = len(heat.x) - 1                      # as if the canvas were wider than that
        (heat,) = [t for t in canvas.canvas_map(tr).data if t.type == "heatmap"]
        assert heat.texttemplate == "" and "holds" in heat.customdata[-1][0]      # the hover still names it
    finally:
        canvas.MAX_LABELLED = wide


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.npz")), ids=lambda p: p.stem)
def test_every_view_draws_every_prebaked_example_at_a_middle_step_with_a_position_selected(path):
    """What the scrubber asks when a step settles (``on_settle``): each view at a step inside the run, not only at
    its end (a view that reads its records per step broke only there)."""
    from explorer.render import render_views
    tr = Trace.load(path)
    out = render_views(tr, len(tr.records) // 2, int(tr.meta.prompt_len) + 1, None)
    assert out and all(v is not None for v in out.values())
