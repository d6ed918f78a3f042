"""The per-request time budget stops a decode between forwards and a sweep between decodes, keeping what finished."""

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


def test_sweep_stops_between_decodes_and_reports_what_finished(sdar_dir):
    service = DecodeService(default_model=str(sdar_dir), max_seconds=60)
    calls = []
    rows = service.sweep(["ar", "threshold:tau=0.5,block_size=8"], 10,
                         should_stop=lambda: calls.append(1) or len(calls) > 6)
    assert rows and all(r["stopped_early"] and r["n"] == 3 for r in rows)      # 3 problems x 2 settings finished
