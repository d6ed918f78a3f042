"""``python -m engine record -- SCRIPT``: a script that knows nothing of Unmask, recorded from outside (the hook
installed through PYTHONPATH), gives the trace the Recorder gives inside it; what cannot be recorded is one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

from engine.record.cli import BOOT
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


def test_the_hook_never_raises_into_the_scripts_decode(tmp_path):
    """An empty batch, or a result the recording cannot read, ends the recording (its status says why) and the
    script's ``decode`` goes on; a trace that cannot be written is a status line too, not a missing status."""
    from types import SimpleNamespace
    from engine.record.auto import State
    from engine.record.calls import RecordError

    def unreadable(row):
        raise RecordError("the loop's result is not token ids")
    rec = SimpleNamespace(done=False, failed=None, reader=SimpleNamespace(row=0), finish=unreadable,
                          timeline=SimpleNamespace(open=object(), n=6, P=2, mask_id=9))
    state = State(dict(out=str(tmp_path / "gone" / "run.npz"), status=str(tmp_path / "status.json")))
    state.recorder = rec
    state.decoded(np.zeros((0, 6), dtype=np.int64))          # a (0, n) batch
    assert rec.failed is None
    state.decoded(np.arange(6))
    assert rec.failed == "the loop's result is not token ids" and rec.done

    def full_disk(out):
        raise OSError(28, "No space left on device")
    state.recorder = SimpleNamespace(failed=None, save=full_disk)
    state.write()
    assert "the trace could not be written" in json.loads((tmp_path / "status.json").read_text())["error"]


def boot_env(tmp_path, site: str) -> dict:
    """The script's environment as ``run`` makes it, with an earlier PYTHONPATH entry ``site``."""
    cfg = dict(out=str(tmp_path / "run.npz"), status=str(tmp_path / "status.json"))
    return dict(os.environ, UNMASK_RECORD=json.dumps(cfg), PYTHONPATH=os.pathsep.join([str(BOOT), ROOT, site]))


def test_only_the_scripts_own_process_is_recorded_and_a_sibling_keeps_its_status(tmp_path):
    """A child of the script does not inherit the hook; a process that recorded nothing leaves the status an
    earlier one wrote; the ``sitecustomize`` the boot folder hides still runs."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\nos.environ['HIDDEN_SITE_RAN'] = '1'\n")
    child = "import os, subprocess, sys; print(subprocess.run([sys.executable, '-c', " \
            "'import os; print(os.environ.get(\"UNMASK_RECORD\"), os.environ.get(\"HIDDEN_SITE_RAN\"))'], " \
            "capture_output=True, text=True).stdout.strip(), os.environ.get('HIDDEN_SITE_RAN'))"
    (tmp_path / "status.json").write_text('{"nfe": 3, "closed": true, "tokens": 4}')     # a sibling's
    done = subprocess.run([sys.executable, "-c", child], env=boot_env(tmp_path, str(site)),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["None", "1", "1"]
    assert json.loads((tmp_path / "status.json").read_text()) == {"nfe": 3, "closed": True, "tokens": 4}
