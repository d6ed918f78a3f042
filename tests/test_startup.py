"""A first start: a busy port stops ``python app.py`` with one line and exit 2 before any model loads, and the
start-up log names the settings in force (Space mode and its forwarded-for rule, or the named proxies; the
limits)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from engine import settings
from explorer.page import startup

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def listening():
    """A port some other server listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_a_busy_port_is_refused_in_one_line_and_a_free_one_passes(listening):
    with pytest.raises(settings.SettingError) as e:
        startup.check_port("127.0.0.1", listening)
    assert e.value.code == 2 and f"port {listening}" in str(e.value) and "\n" not in str(e.value)
    named = int(str(e.value).split("GRADIO_SERVER_PORT=")[1].split()[0])     # the hint names a port free now
    assert named != listening and startup.bound("127.0.0.1", named) is None, str(e.value)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    startup.check_port("127.0.0.1", free)


def test_app_on_a_busy_port_exits_2_with_one_line_before_loading_models(listening, tmp_path):
    """Before gradio and torch are imported: -X importtime lists every module the start imported."""
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1", GRADIO_SERVER_NAME="127.0.0.1",
               GRADIO_SERVER_PORT=str(listening), UNMASK_CACHE_DIR=str(tmp_path), GRADIO_ANALYTICS_ENABLED="False")
    out = subprocess.run([sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stderr[-2000:]
    imported = {ln.split("|")[-1].strip() for ln in out.stderr.splitlines() if ln.startswith("import time:")}
    assert imported and not {"gradio", "torch"} & imported, sorted({"gradio", "torch"} & imported)
    lines = [ln for ln in out.stderr.strip().splitlines() if not ln.startswith("import time:")]
    assert len(lines) == 1 and lines[0].startswith("error: port") and "busy" in lines[0], lines
    assert f"GRADIO_SERVER_PORT={listening} " not in lines[0], lines      # not the busy port again
    assert not (tmp_path / "traces").exists() and out.stdout == ""     # nothing built, nothing said to be served


def test_the_start_up_line_names_the_visitor_rule_and_the_limits(monkeypatch):
    monkeypatch.delenv("SPACE_ID", raising=False)
    monkeypatch.delenv("UNMASK_TRUSTED_PROXIES", raising=False)
    monkeypatch.setenv("UNMASK_MAX_SECONDS", "7.5")
    line = startup.settings_line()
    assert "socket's address" in line and "MAX_SECONDS=7.5" in line and "PER_ADDRESS=128" in line, line
    monkeypatch.setenv("SPACE_ID", "someone/unmask")
    assert "Space mode" in startup.settings_line() and "X-Forwarded-For" in startup.settings_line()
    monkeypatch.setenv("UNMASK_TRUSTED_PROXIES", "10.0.0.0/8")
    line = startup.settings_line()
    assert "Space mode" not in line and "10.0.0.0/8" in line, line
    assert "\n" not in line
