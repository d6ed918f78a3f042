"""The page's "Branch here" (explorer/page/branch.py, explorer/views/branch.py), driven as gradio calls it."""

import asyncio
import re

import gradio as gr
import pytest

from engine.runtime.branch import canvas_after
from engine.harness.service import DecodeService
from explorer.page.branch import choose_point, run_branch
from explorer.page.context import Page

PROMPT = "Tom has a red ball . He gives it to Ann ."


@pytest.fixture(scope="module")
def page():
    service = DecodeService(default_model="unmask-tasks-small", max_seconds=30)
    return Page(service, {}, models=("unmask-tasks-small",))


@pytest.fixture(scope="module")
def run(page):
    return page.service.run(PROMPT, "threshold", dict(block_size=8, tau=0.9, gen_length=32, temperature=1.0,
                                                      seed=2), "unmask-tasks-small")


def masked_after(tr, step):
    m = tr.meta
    return next(p for p in range(m.prompt_len, m.gen_end) if canvas_after(tr, step)[p] == m.mask_token_id)


def drive(gen):
    async def go():
        return [out async for out in gen]
    return asyncio.run(go())


def test_branch_here_offers_the_selected_positions_candidates_as_tokens(run):
    step = 2
    pos = masked_after(run, step)
    point, where, radio = choose_point(run, {"step": step, "pos": pos})
    choices = radio.constructor_args["choices"]
    assert point == {"step": step, "pos": pos} and "still masked" in where and f"after step {step}" in where
    assert choices and all(not label.startswith("?") and value.isdigit() for label, value in choices)
    # the probabilities as the candidates panel prints them (scrub.fmt: three digits), of the forward named
    assert all(re.search(r"\(\d\.\d{3}\)$", label) for label, _ in choices) and f"forward {step + 1}" in where
    decoded = next(p for p in range(run.meta.prompt_len, run.meta.gen_end) if canvas_after(run, step)[p]
                   != run.meta.mask_token_id)
    _, where, radio = choose_point(run, {"step": step, "pos": decoded})
    assert "already decoded" in where and not radio.constructor_args["choices"]
    # a masked slot outside the next forward's block has no candidates there: said so, not "force one of" none
    later = max(p for p in range(run.meta.prompt_len, run.meta.gen_end)
                if canvas_after(run, step)[p] == run.meta.mask_token_id)
    assert later not in run.records[step].positions
    _, where, radio = choose_point(run, {"step": step, "pos": later})
    assert not radio.constructor_args["choices"] and "force one of" not in where and "type a token" in where


def test_a_slot_a_verify_forward_scores_offers_the_drafts_candidates():
    """S2D2's verify forward records no candidates: a masked slot in its block was said to be "outside the block
    forward 2 scores" with none; it lists the candidates of the draft forward before it, naming that forward."""
    from pathlib import Path
    from engine.records.trace import Trace
    tr = Trace.load(Path(__file__).resolve().parent.parent / "assets" / "examples" / "s2d2.npz")
    step = next(s for s, r in enumerate(tr.records) if r.kind == "verify" and r.topk.topk_ids is None)
    pos = next(int(p) for p in tr.records[step].positions if canvas_after(tr, step)[int(p)] == tr.meta.mask_token_id)
    _, where, radio = choose_point(tr, {"step": step, "pos": pos})
    choices = radio.constructor_args["choices"]
    assert choices and all(value.isdigit() for _, value in choices) and "outside" not in where
    assert tr.records[step - 1].kind == "draft" and f"force one of the candidates forward {step} proposed" in where


def test_a_forced_candidate_shows_both_futures_with_the_shared_prefix_shaded(page, run):
    step = 2
    pos = masked_after(run, step)
    point, _, radio = choose_point(run, {"step": step, "pos": pos})
    label, value = radio.constructor_args["choices"][-1]          # the least likely of the five
    (html_, fig_a, fig_b), = drive(run_branch(page, run, point, value, "", "edit:block_size=8,tau=0.9"))
    assert f"Branched after step {step}" in html_ and "forced" in html_ and "edit:block_size=8" in html_
    assert "this run" in html_ and "the branch" in html_
    for fig in (fig_a, fig_b):
        (shade,) = [s for s in fig.layout.shapes if s.name == "shared prefix"]
        assert shade.y0 == 0.5 and shade.y1 == step + 0.5


def failed(outs, words: str) -> None:
    """A failed branch: one line in the panel, where its result goes, and both maps emptied (the previous branch
    cleared; a raised error would badge every output over its old content)."""
    (html_, fig_a, fig_b), = outs
    assert html_.startswith("<p class='um-failed' role='alert'>") and words in html_ and html_.count("<p") == 1
    assert fig_a is None and fig_b is None


def test_typed_tokens_and_missing_positions_are_one_line_errors_that_clear_the_panel(page, run):
    point = {"step": 1, "pos": None}
    failed(drive(run_branch(page, run, point, "12", "", "")), "select a masked position")
    failed(drive(run_branch(page, run, {"step": 1, "pos": masked_after(run, 1)}, None, "<no such token>", "")),
           "not a token of this model")
    failed(drive(run_branch(page, run, {"step": 1, "pos": masked_after(run, 1)}, None, "<b>x</b>", "")),
           "&lt;b&gt;x&lt;/b&gt;")                                   # the visitor's text, escaped
    with pytest.raises(gr.Error, match="run a decode first"):
        choose_point(None, {})


def test_the_texts_mark_where_the_futures_differ(run):
    from engine.records.trace import Trace
    from explorer.views.branch import marked_text
    other = Trace(meta=run.meta.__class__.from_dict(run.meta.to_dict()), records=run.records)
    p = run.meta.prompt_len
    other.meta.final_tokens = list(run.meta.final_tokens)
    other.meta.final_tokens[p] = run.meta.mask_token_id
    text = marked_text(run, other)
    assert text.count("<mark") == 1 and marked_text(run, run).count("<mark") == 0


def test_the_tour_takes_the_wheel_on_the_opening_story():
    """The tour's what-if stop: the pre-baked branch of the opening story, at the step the stop shows, drawn in the
    Branch tab with its forced token."""
    from pathlib import Path
    from engine.records.trace import Trace
    from explorer.page import branch
    from explorer.page.tour import STOPS
    examples = Path(__file__).resolve().parent.parent / "assets" / "examples"
    (stop,) = [s for s in STOPS if s.branch]
    base, br = Trace.load(examples / f"{stop.example}.npz"), Trace.load(examples / f"{stop.branch}.npz")
    assert stop.target == "branch-out" and br.meta.branch["step"] == stop.step(base)
    assert br.meta.branch["base_prompt"] == base.meta.prompt and br.meta.branch["force"]
    html_, fig_a, fig_b = branch.view(Page(None, {}), base, br)
    assert f"Branched after step {stop.step(base)}" in html_ and "forced" in html_ and "edit" in html_
    assert "<mark" in html_                                   # the futures part somewhere


def test_a_links_branch_shares_the_budget_of_its_base_run(page, run):
    """A link's branch runs on the clock its base run started (``started``): with the whole budget already spent
    by the base, the branch does not start, and says so in one line (before, it got a budget of its own)."""
    import time
    point = {"step": 2, "pos": None}
    failed(drive(run_branch(page, run, point, None, "", "", started=time.monotonic() - 2 * page.service.max_seconds)),
           "the branch did not start: stopped after")
    (html_, _, _), = drive(run_branch(page, run, point, None, "", "", started=time.monotonic()))
    assert "Branched after step 2" in html_                      # with its share of the budget left, it runs
