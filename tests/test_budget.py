"""The per-request time budget stops a decode between forwards and a sweep between decodes, keeping what finished."""

import pytest

from engine.service import DecodeService

PROMPT = "Ann has 3 apples . She buys 5 more . How many apples does she have now ?"


def test_decode_stops_at_the_budget_and_keeps_the_partial_trace(sdar_dir):
    service = DecodeService(default_model=str(sdar_dir), max_seconds=1e-6)
    traces = list(service.stream(PROMPT, "ar", dict(gen_length=32, stop_at_eos=False)))
    last = traces[-1]
    assert "time budget" in last.meta["limit"] and len(last.records) == 1       # stopped after the first forward
    full = DecodeService(default_model=str(sdar_dir), max_seconds=60).run(PROMPT, "ar",
                                                                          dict(gen_length=32, stop_at_eos=False))
    assert "limit" not in full.meta and len(full.records) == 32


def test_sweep_streams_settings_and_stops_keeping_what_finished(sdar_dir):
    service = DecodeService(default_model=str(sdar_dir), max_seconds=60)
    done = []
    partial = list(service.sweep_stream(["ar", "threshold:tau=0.5,block_size=8"], 10,
                                        progress=lambda i, total: done.append(i), should_stop=lambda: len(done) >= 1))
    assert [[r["n"] for r in rows] for rows in partial] == [[10]]          # the first setting, then the stop
    calls = []

    def stop():       # decodes run eight at a time and stop between forwards
        calls.append(1)
        return len(calls) > 700     # the warm-up (64 forwards), the first eight decodes (64 each), then stop
    rows = service.sweep(["ar", "threshold:tau=0.5,block_size=8"], 10, should_stop=stop)
    assert rows and rows[0]["stopped_early"] and 0 < rows[0]["n"] < 10     # the problems that finished, in order
    assert rows[0]["outcomes"] == DecodeService(default_model=str(sdar_dir)).sweep(["ar"], rows[0]["n"])[0]["outcomes"]


def test_a_cancelled_decode_stops_between_forwards_with_its_partial_trace(sdar_dir):
    from engine.errors import BudgetExceeded
    service = DecodeService(default_model=str(sdar_dir), max_seconds=60)
    gen = service.generation("Ann has 3 pens .", "ar", dict(gen_length=32, stop_at_eos=False))
    gen.should_stop = lambda: len(gen.records) >= 5
    with pytest.raises(BudgetExceeded, match="cancelled") as e:
        gen.run()
    assert len(e.value.partial.records) == 5
