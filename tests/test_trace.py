import numpy as np
import pytest

from engine.decoders import build_decoder
from engine.runtime.loop import Generation
from engine.records.trace import Trace, TraceFormatError


def test_trace_roundtrip(adapter, tmp_path):
    tr = Generation(adapter, "Mia has 5 eggs . How many eggs are there now ?",
                    build_decoder("threshold", tau=0.8, block_size=4, gen_length=12)).run()
    tr.records[0].extra["demo"] = np.arange(tr.records[0].positions.size, dtype=np.float32)
    tr.records[1].extra["router"] = {"score": 0.5, "decision": True}
    path = tmp_path / "t.npz"
    tr.save(path)
    back = Trace.load(path)
    assert back.meta.token_ids == tr.meta.token_ids and back.meta.params == tr.meta.params
    assert len(back.records) == len(tr.records)
    for a, b in zip(tr.records, back.records):
        for f in ("positions", "tokens_before", "tokens_after", "committed", "reason", "candidate", "confidence"):
            assert np.array_equal(getattr(a, f), getattr(b, f))
        assert a.kind == b.kind and a.nfe == b.nfe
    assert np.array_equal(back.records[0].extra["demo"], tr.records[0].extra["demo"])
    assert "demo" not in back.records[1].extra
    assert back.records[1].extra["router"] == {"score": 0.5, "decision": True}


def test_trace_rejects_garbage(adapter, tmp_path):
    p = tmp_path / "bad.npz"
    p.write_bytes(b"not a zip")
    with pytest.raises(TraceFormatError, match="not a trace"):
        Trace.load(p)
    good = Generation(adapter, "Mia has 5 eggs .", build_decoder("ar", gen_length=4)).run().to_bytes()
    with pytest.raises(TraceFormatError):
        Trace.from_bytes(good[: len(good) // 2])                    # truncated
    arrays = Generation(adapter, "Mia has 5 eggs .", build_decoder("ar", gen_length=4)).run().to_arrays()
    arrays["__meta__"] = np.array(str(arrays["__meta__"]).replace('"format": 1', '"format": 99'))
    with pytest.raises(TraceFormatError, match="unsupported trace format 99"):
        Trace.from_arrays(arrays)
