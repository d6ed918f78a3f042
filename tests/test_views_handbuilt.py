"""Views on a trace built by hand (no model, no decoder): every cell and marker is known in advance."""

import math

import numpy as np
import pytest

from engine.records.trace import Reason, StepRecord, Trace
from explorer.grid import DECODED, MASKED, NEW, Grid
from explorer.render import render_all
from explorer.registry import VIEWS
from explorer.views import heatmaps
from explorer.views.candidates import candidates
from explorer.views.reasons import reason_map
from explorer.views.text import render_text

M, NAN = 3, np.nan     # the mask id


def record(step, block, positions, before, after, reason, cand, conf, nfe, **extra):
    n = len(positions)
    return StepRecord(block=block, step_in_block=step, kind="draft", positions=np.array(positions, np.int32),
                      tokens_before=np.array(before, np.int32), tokens_after=np.array(after, np.int32),
                      committed=np.array(reason) > 0, reason=np.array(reason, np.int8),
                      candidate=np.array(cand, np.int32), confidence=np.array(conf, np.float32),
                      margin=np.zeros(n, np.float32), entropy=np.full(n, 0.5, np.float32), nfe=nfe, wall_ms=1.0,
                      extra=extra)


@pytest.fixture
def trace():
    """Prompt [BOS, 10] at positions 0-1; four generated slots 2..5 in blocks of 2: tokens a b c [EOS]."""
    top = dict(topk_ids=np.array([[7, 8, 9, 1, 2], [8, 7, 9, 1, 2]], np.int32),
               topk_p=np.array([[0.95, 0.02, 0.01, 0.01, 0.01], [0.4, 0.3, 0.2, 0.05, 0.05]], np.float32))
    T, A = int(Reason.THRESHOLD), int(Reason.ARGMAX)
    recs = [record(0, 0, [2, 3], [M, M], [7, M], [T, 0], [7, 8], [0.95, 0.4], 1, **top),
            record(1, 0, [2, 3], [7, M], [7, 8], [0, A], [7, 8], [0.99, 0.6], 2),
            record(0, 1, [4, 5], [M, M], [9, 2], [T, T], [9, 2], [0.97, 0.93], 3)]
    vocab = {"1": "[BOS]", "2": "[EOS]", "3": "[MASK]", "7": "a", "8": "b", "9": "c", "10": "Q"}
    meta = dict(prompt="Q", prompt_ids=[1, 10], prompt_len=2, gen_end=6, mask_token_id=M, block_size=2,
                vocab=vocab, token_ids=[7, 8, 9, 2], text="a b c", generated_tokens=4, wall_s=0.01,
                nfe=3, nfe_by_kind={"draft": 3}, decoder="threshold", params={"tau": 0.9, "block_size": 2},
                final_tokens=[1, 10, 7, 8, 9, 2], stop_ids=[2], model="hand")
    return Trace(meta, recs)


def test_grid_cells(trace):
    g = Grid.of(trace)
    assert g.state.tolist() == [[NEW, MASKED, MASKED, MASKED], [DECODED, NEW, MASKED, MASKED],
                                [DECODED, DECODED, NEW, NEW]]
    assert np.allclose(g.confidence, [[0.95, 0.4, NAN, NAN], [NAN, 0.6, NAN, NAN], [NAN, NAN, 0.97, 0.93]],
                       equal_nan=True)
    assert g.commit_step.tolist() == [0, 1, 2, 2] and g.block_edges() == [2]
    assert g.labels.tolist() == ["2 a", "3 b", "4 c", "5 [EOS]"]
    assert g.hover[0][1] == "candidate b · p 0.40"
    assert g.hover[1][1] == "candidate b · p 0.60 · committed"
    assert g.hover[1][0] == "a (decoded)" and g.hover[0][2] == "masked (not scored)"


def test_heatmaps_text_reasons_candidates(trace):
    g = Grid.of(trace)
    conf = heatmaps.confidence(trace, 1, g)
    assert np.array(conf.data[0].z).tolist() == [[95, 40, 200, 200], [200, 60, 200, 200], [200, 200, 97, 93]]
    assert [s.y0 for s in conf.layout.shapes if s.name == "cursor-edge"] == [2.5]  # under step 2 of 3 (1-based)
    assert [s.visible for s in conf.layout.shapes if s.name == "selected"] == [False]   # none selected
    assert list(conf.data[0].y) == [1, 2, 3]                                          # rows are 1-based steps
    assert render_text(trace, 0, g).count("um-mask") == 3
    assert render_text(trace, None, g).count("um-mask") == 0
    rm = reason_map(trace, None, g)
    assert {d.name: len(d.x) for d in rm.data} == {"threshold": 3, "forced argmax": 1}
    html = candidates(trace, 0, g, 3)
    assert "position 3" in html and html.count("um-cand-row") == 5 and "still masked" in html
    assert "committed at step 2" in candidates(trace, 1, g, 3)


def test_render_all_gives_every_view_the_same_arguments(trace):
    out = render_all(trace, 1, "valid", 3)
    assert set(out) == {"summary", "text", "candidates"} | {v.name for v in VIEWS}
    assert ">right<" in out["summary"] and "NFE" in out["summary"]
    again = render_all(trace, 1, "valid", 3)
    assert {k: o if isinstance(o, str) else o.to_json() for k, o in out.items()} == \
           {k: o if isinstance(o, str) else o.to_json() for k, o in again.items()}    # a pure function


def test_summary_warns_about_unknown_words_and_limits(trace):
    from explorer.views.summary import render_summary
    trace.meta.unknown_words = ["dogs", "<img src=x>"]
    trace.meta.limit = "stopped after 2 forwards: the time budget"
    html = render_summary(trace)
    assert "dogs" in html and "&lt;img src=x&gt;" in html and "<img" not in html
    assert "Stopped early" in html
    trace.meta.model = "unmask-tasks-small"          # an embedded model knows only its tasks' words
    assert "only know the words of their tasks" in render_summary(trace)
    trace.meta.model = "tinyllada"                   # a checkpoint of the operator's: its own tokenizer's words
    assert "only know the words" not in render_summary(trace) and "its tokenizer" in render_summary(trace)


def test_decode_gif_has_one_frame_per_forward(trace):
    import io

    from PIL import Image

    from PIL import ImageColor

    from explorer.gif import decode_gif
    from explorer.scrub import hue
    data = decode_gif(trace)
    img = Image.open(io.BytesIO(data))
    assert data[:6] == b"GIF89a" and img.n_frames == len(trace.records)
    img.seek(0)
    first = np.array(img.convert("RGB"))
    img.seek(img.n_frames - 1)
    last = np.array(img.convert("RGB"))
    assert not np.array_equal(first, last)                        # the answer unmasks between frames
    sure, unsure = ImageColor.getrgb(hue(100)), ImageColor.getrgb(hue(0))      # the page's scale: green to red
    assert sure[1] > sure[0] and unsure[0] > unsure[1]


def test_the_gif_draws_the_text_views_states_in_its_colours():
    """A frame holds the revised outline exactly when the text view shows a revised slot at that step, and every
    frame draws the legend, whose revised sample is the one purple box of a frame without revisions."""
    import io
    from pathlib import Path

    from PIL import Image

    from engine.records.trace import Trace
    from explorer.gif import STYLE, decode_gif
    from explorer.scrub import chips, payload
    tr = Trace.load(Path(__file__).resolve().parent.parent / "assets" / "examples" / "edit.npz")
    d = payload(tr)
    img = Image.open(io.BytesIO(decode_gif(tr)))
    purple = np.array(STYLE["um-rev"][1])

    def purple_pixels(s):
        img.seek(s)
        px = np.array(img.convert("RGB")).reshape(-1, 3).astype(int)
        return int((np.abs(px - purple).sum(1) < 30).sum())

    revised = [s for s in range(d["n"]) if any("um-rev" in c["cls"] for c in chips(d, s, None))]
    plain = [s for s in range(d["n"]) if s not in revised]
    assert revised and plain
    legend_only = max(purple_pixels(s) for s in plain)
    assert legend_only > 0                                          # the legend's sample
    assert all(purple_pixels(s) > legend_only for s in revised)     # and the slots themselves


def test_ebs_needed_gamma_is_the_bounds_left_side_at_each_slots_rank():
    """A γ drag previews EB by the γ each slot needed: its rank's Σ H − max H. At the run's own γ exactly the
    committed cells pass."""
    from pathlib import Path

    from engine.records.trace import Trace
    from explorer.scrub import payload
    tr = Trace.load(Path(__file__).resolve().parent.parent / "assets" / "examples" / "eb.npz")
    d = payload(tr)
    gamma = 100 * float(tr.meta.params["entropy_bound"])
    cells = [(j, s, h) for j, col in enumerate(d["need"]) for s, h in col]
    assert cells
    for j, s, h in cells:
        assert (h <= gamma) == (s in d["new"][j]), (j, s, h)
    r = next(r for r in tr.records if r.has("eb_order"))
    rank, bound = r.field("eb_order"), r.field("eb_bound")
    i = int(np.flatnonzero(rank == 1)[0])                  # the second-lowest entropy: the bound is the first's H
    assert bound[1] == pytest.approx(np.sort(r.field("entropy_nats")[rank >= 0])[0], abs=1e-6)
    assert any(e == [0, math.ceil(100 * float(bound[1]) - 1e-9)] for e in d["need"][int(r.positions[i]) - d["P"]])


def test_the_previews_hundredths_lean_the_way_their_rule_compares():
    """A draft's confidence is truncated (c ≥ τ: 0.996 does not clear τ 1) and EB's needed γ rounded up (need ≤ γ:
    0.504 does not fit under γ 0.50), each exact on the dial's 0.01 grid (0.57 is 57 both ways)."""
    from explorer.scrub import hundredths
    assert [hundredths(0.996, "down"), hundredths(0.996)] == [99, 100]
    assert [hundredths(0.504, "up"), hundredths(0.504)] == [51, 50]
    assert hundredths(0.57, "down") == hundredths(0.57, "up") == 57 and hundredths(float("nan")) is None
