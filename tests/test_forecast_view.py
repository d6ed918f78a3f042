"""The Kalman forecast view opens where its fan shows: a TSPD + CE run ends on a step whose block is all but
committed (the old view showed lines stacked at 1.0, and its busiest step's fans were too thin to see), so there it
shows the step whose four widest forecast bands (in probability) are widest together, on those four positions,
and its title names that step and the slider's."""

from __future__ import annotations

from engine.harness.service import DecodeService
from engine.decoders.tspd.card import TSPDDraftFields
from engine.records.trace import fields
from explorer.views.trajectory import band, forecast_rows, telling, trajectories


def fans(fig) -> int:
    return sum(1 for t in fig.data if getattr(t, "fill", None) == "toself")


def widest(rec, k=4) -> float:
    f = fields(rec, TSPDDraftFields)
    return sum(sorted((band(f, i) for i in forecast_rows(rec)), reverse=True)[:k])


def test_the_forecast_view_opens_where_its_fan_is_widest_and_a_scrubbed_step_is_shown_as_asked():
    run = DecodeService(default_model="unmask-tasks-small", max_seconds=60).run(
        "Tell a story about a yak named Finn.", "tspd", {"block_size": 8, "gen_length": 64})
    last = len(run.records) - 1
    assert len(forecast_rows(run.records[last])) < max(len(forecast_rows(r)) for r in run.records)
    s, positions = telling(run)
    counts = [len(forecast_rows(r)) for r in run.records]
    widths = [widest(r) if c else 0.0 for r, c in zip(run.records, counts)]
    assert widths[s] == max(widths) > 0 and s == widths.index(max(widths))    # the rule: the widest, the earliest
    f = fields(run.records[s], TSPDDraftFields)
    rows = [int(run.records[s].positions.tolist().index(p)) for p in positions]
    assert min(band(f, i) for i in rows) > 0.02, [band(f, i) for i in rows]   # each fan shown is visible
    opened = trajectories(run, last)
    assert fans(opened) == len(positions) >= 1, fans(opened)
    title = opened.layout.title.text                    # names the step shown and the slider's (the last)
    assert f"step {s + 1}, its widest fan" in title and f"slider's step {last + 1}" in title, title
    assert {t.name for t in opened.data if t.name and t.name.startswith("pos ")} == {f"pos {p}" for p in positions}
    # a step with a forecast is drawn as asked, with no note
    other = next(i for i, c in enumerate(counts) if c and i != s)
    asked = trajectories(run, other)
    assert "slider" not in asked.layout.title.text and fans(asked) >= 1
