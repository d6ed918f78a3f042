"""The GPU check (``python -m tools.gpu``) runs end to end at toy width on the CPU: the same code a GPU lease runs,
its JSON with its provenance under --out, its summary short enough for a remote log."""

import json

from tools.gpu.__main__ import SUMMARY_BYTES, main


def test_the_gpu_check_runs_at_toy_width(tmp_path, capsys):
    main(["--tiny", "--out", str(tmp_path), "--gen", "8", "--reps", "1", "--only", "rules,mixed,static",
          "--decoders", "s2d2,klass,simsd", "--static", "threshold_batch1,s2d2"])
    summary = capsys.readouterr().out
    out = json.loads((tmp_path / "gpu_check.json").read_text())
    assert out["provenance"]["commit"] and out["provenance"]["machine"]["cores"] >= 1
    assert out["errors"] == {} and out["rules"]["errors"] == {}
    rows = out["rules"]["decoders"]
    assert {r["spec"].split(":")[0] for r in rows} == {"s2d2", "klass", "simsd"}
    # on a CPU a rule's reads of host tensors copy nothing (only the round's statistics count): at most a few KB
    assert all(r["replay_ms"] > 0 and 0 <= r["readback_bytes_per_forward"] < 4096 for r in rows)
    assert any(r["readback_bytes_per_forward"] > 0 for r in rows)
    assert any("verify_over_draft" in r for r in rows) and out["rules"]["seed"]["same_tokens"]
    mixed = out["mixed"]
    assert mixed["decodes"] == 8 and mixed["same_as_alone"] == 8          # fp32 on the CPU: a round changes nothing
    pair = out["static"]["threshold_batch1"]
    assert pair["same_tokens"] and set(pair["static"]["path"]) == {"static eager"}
    assert all(set(r["path"]) == {"static eager"} for r in out["static"]["s2d2"])
    assert "s2d2" in summary and "mixed round of 8" in summary and len(summary.encode()) <= SUMMARY_BYTES


def test_the_smoke_phase_stops_at_the_first_failure(tmp_path, monkeypatch, capsys):
    from tools.gpu import rules

    def broken(*a, **k):
        raise RuntimeError("kernel launch failed")
    monkeypatch.setattr(rules, "one", broken)
    try:
        main(["--tiny", "--out", str(tmp_path), "--only", "smoke"])
    except SystemExit as e:
        assert e.code == 2
    else:
        raise AssertionError("a failing smoke run must stop the check")
    assert "smoke run failed at" in capsys.readouterr().err


def test_an_error_in_a_phase_fails_the_check_in_one_line(tmp_path, monkeypatch, capsys):
    """A phase that raises keeps its error in the JSON (the other phases run), and the process exits non-zero."""
    from tools.gpu import rules

    def broken(*a, **k):
        raise RuntimeError("a decoder's bug")
    monkeypatch.setattr(rules, "every_decoder", broken)
    try:
        main(["--tiny", "--out", str(tmp_path), "--gen", "8", "--reps", "1", "--only", "rules"])
    except SystemExit as e:
        assert e.code == 1
    else:
        raise AssertionError("a phase's error must fail the check")
    out = json.loads((tmp_path / "gpu_check.json").read_text())
    assert out["errors"] == {"rules": "RuntimeError: a decoder's bug"}
    assert "GPU check failed: an error in rules" in capsys.readouterr().err
