"""The per-request time budget stops a decode between forwards and a sweep between decodes, keeping what finished."""

import pytest

from engine.harness.service import DecodeService

PROMPT = "Ann has 3 apples . She buys 5 more . How many apples does she have now ?"


def test_decode_stops_at_the_budget_and_keeps_the_partial_trace(sdar_dir):
    service = DecodeService(default_model=str(sdar_dir), max_seconds=1e-6)
    traces = list(service.stream(PROMPT, "ar", dict(gen_length=32, stop_at_eos=False)))
    last = traces[-1]
    assert "time budget" in last.meta.limit and len(last.records) <= 1      # stopped at its first round boundary
    full = DecodeService(default_model=str(sdar_dir), max_seconds=60).run(PROMPT, "ar",
                                                                          dict(gen_length=32, stop_at_eos=False))
    assert full.meta.limit is None and len(full.records) == 32


def test_sweep_streams_settings_and_stops_keeping_what_finished(sdar_dir):
    service = DecodeService(default_model=str(sdar_dir), max_seconds=60)
    specs = ["ar", "threshold:tau=0.5,block_size=8"]
    full = list(service.sweep_stream(specs, 10))
    assert len(full) == 2 and len(full[0]) == 1 and [r["spec"] for r in full[1]] == specs   # a row per setting
    assert all(r["n"] == 10 and not r["stopped_early"] for r in full[1])
    done = []
    # two lanes of eight: the first sixteen decodes (every ar problem, threshold's first six) share their rounds;
    # the stop falls once they have finished, so the last four stop at their first forward
    stopped = list(service.sweep_stream(specs, 10, progress=lambda i, total: done.append((i, total)),
                                        should_stop=lambda: len(done) >= 16))
    assert done[0] == (1, 20) and [r["spec"] for r in stopped[-1]] == specs
    for row in stopped[-1]:   # what finished of each setting, in order, as the full run decoded it
        ref = next(r for r in full[1] if r["spec"] == row["spec"])
        assert 0 < row["n"] <= 10 and row["outcomes"] == ref["outcomes"][:row["n"]]
    assert [r["stopped_early"] for r in stopped[-1]] == [False, True]


def test_a_cancelled_decode_stops_between_forwards_with_its_partial_trace(sdar_dir):
    from engine.errors import BudgetExceeded
    service = DecodeService(default_model=str(sdar_dir), max_seconds=60)
    gen = service.generation("Ann has 3 pens .", "ar", dict(gen_length=32, stop_at_eos=False))
    gen.should_stop = lambda: len(gen.records) >= 5
    with pytest.raises(BudgetExceeded, match="cancelled") as e:
        gen.run()
    assert len(e.value.partial.records) == 5
