"""The Kalman forecast view opens where the forecast says something: a TSPD + CE run ends on a step whose block is
all but committed (the old view showed four lines stacked at 1.0), so there it shows the step whose forecast
covers the most still-masked positions, on the four whose LCB at the horizon lies nearest τ, and says so."""

from __future__ import annotations

from engine.harness.service import DecodeService
from explorer.views.trajectory import forecast_rows, telling, trajectories


def fans(fig) -> int:
    return sum(1 for t in fig.data if getattr(t, "fill", None) == "toself")


def test_the_forecast_view_opens_on_its_busiest_step_and_a_scrubbed_step_is_shown_as_asked():
    run = DecodeService(default_model="unmask-tasks-small", max_seconds=60).run(
        "Tell a story about a yak named Finn.", "tspd", {"block_size": 8, "gen_length": 64})
    last = len(run.records) - 1
    assert len(forecast_rows(run.records[last])) < max(len(forecast_rows(r)) for r in run.records)
    s, positions = telling(run)
    counts = [len(forecast_rows(r)) for r in run.records]
    assert counts[s] == max(counts) > 0 and s == counts.index(max(counts))    # the rule: the most, the earliest
    opened = trajectories(run, last)
    assert fans(opened) == len(positions) >= 1, fans(opened)
    assert f"at step {s + 1}" in opened.layout.title.text and "scrub" in opened.layout.title.text
    assert {t.name for t in opened.data if t.name and t.name.startswith("pos ")} == {f"pos {p}" for p in positions}
    # a step with a forecast is drawn as asked, with no note
    other = next(i for i, c in enumerate(counts) if c and i != s)
    asked = trajectories(run, other)
    assert "scrub" not in asked.layout.title.text and fans(asked) >= 1
