"""``python -m engine record -- SCRIPT``: a script that knows nothing of Unmask, recorded from outside (the hook
installed through PYTHONPATH), gives the trace the Recorder gives inside it; what cannot be recorded is one line."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from engine.records.trace import Trace
from explorer.grid import Grid
from tools.record_examples import llada_generate

ROOT = llada_generate.__file__.rsplit("/tools/", 1)[0]


def record(tmp_path, *command: str, flags=()) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine", "record", "--out", str(tmp_path / "run.npz"), *flags,
                           "--", *command], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_a_script_recorded_from_outside_is_the_recorders_trace(tmp_path):
    """The worked example run plainly (its own loop, its own batch_decode) under the command, against the same
    example wrapped in a Recorder in this process."""
    done = record(tmp_path, sys.executable, "-m", "tools.record_examples.llada_generate", "--plain", "--steps", "8",
                  flags=("--block-size", "4"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "8 forwards" in done.stdout and "unknown" not in done.stdout
    outside = Trace.load(tmp_path / "run.npz")
    llada_generate.main(["--out", str(tmp_path / "inside.npz"), "--steps", "8"])
    inside = Trace.load(tmp_path / "inside.npz")
    assert np.array_equal(Grid.of(outside).tokens, Grid.of(inside).tokens)
    for a, b in zip(outside.records, inside.records):
        np.testing.assert_allclose(a.confidence, b.confidence, atol=1e-6)
    assert outside.meta.text == inside.meta.text and outside.meta.vocab == inside.meta.vocab
    assert outside.meta.summary["recorded"]["loop"] == "tools.record_examples.llada_generate"


def test_nothing_to_record_is_one_line_and_status_2(tmp_path):
    done = record(tmp_path, sys.executable, "-c", "print('no model here')")
    assert done.returncode == 2 and "no model here" in done.stdout
    assert done.stderr.strip().count("\n") == 0 and done.stderr.startswith("error: nothing recorded")
    assert not (tmp_path / "run.npz").exists()


def test_a_missing_command_is_refused(tmp_path):
    done = record(tmp_path)
    assert done.returncode == 2 and done.stderr.strip() == \
        "error: give the command to record after --, e.g. -- python my_generate.py"
