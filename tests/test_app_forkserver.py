"""The tests' forked apps (``tools/app_forkserver``) start as ``python app.py`` does: their own settings from
their own environment, their own log, and the app's own exit on a bad setting."""

from __future__ import annotations

import pytest

from tools.local_app import running_app


def test_a_forked_app_reads_its_own_settings_and_a_bad_one_ends_it_with_its_line(tmp_path):
    with pytest.raises(RuntimeError) as e:
        with running_app(tmp_path, forked=True, UNMASK_MAX_SECONDS="nope"):
            pass
    log = (tmp_path / "app.log").read_text()
    assert "exited during start-up" in str(e.value) and "UNMASK_MAX_SECONDS" in log, log
    assert log.strip().count("\n") == 0 and log.startswith("error: "), log        # one line, as from python app.py
