"""The code sandbox (engine.tasks.sandbox) holds against hostile completions: no write outside its folder by any
API, no file contents in the verdict, no network, spawned shells contained, no orphan after the time limit, a fork
bomb bounded; and it refuses to run where it cannot hold."""

from __future__ import annotations

import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from engine.errors import ConfigError
from engine.tasks import get_task
from engine.tasks.sandbox import available, run_tests

pytestmark = pytest.mark.skipif(available() is not None, reason=str(available()))
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def row():
    return get_task("humaneval").problems("test", 1)[0].answer


def body(code: str) -> str:
    """A completion that runs ``code`` (lines) and then returns a wrong answer."""
    return "".join(f"    {line}\n" for line in code.strip().splitlines()) + "    return None\n"


@pytest.fixture
def outside():
    """A path outside the sandbox, in a folder only root may write (the repository's), removed afterwards."""
    path = ROOT / f".sandbox-escape-{uuid.uuid4().hex[:8]}"
    yield path
    path.unlink(missing_ok=True)


@pytest.mark.parametrize("how", [
    "open({p!r}, 'w').write('x')",
    "import io\nio.open({p!r}, 'w').write('x')",
    "import os\nos.close(os.open({p!r}, os.O_WRONLY | os.O_CREAT))",
    "import pathlib\npathlib.Path({p!r}).write_text('x')",
    "import os\nos.posix_spawn('/bin/sh', ['sh', '-c', 'echo x > {p}'], dict())\nimport time\ntime.sleep(0.5)",
    "import ctypes\nctypes.CDLL(None).system(b'echo x > {p}')",
    "import shutil\nshutil.copy('/etc/hostname', {p!r})",
])
def test_nothing_is_written_outside_its_folder_by_any_api(row, outside, how):
    run_tests(row, body(how.format(p=str(outside))), timeout=8)
    assert not outside.exists()


def test_a_private_tmp_is_discarded(row):
    marker = Path("/tmp") / f"unmask-escape-{uuid.uuid4().hex[:8]}"
    run_tests(row, body(f"open({str(marker)!r}, 'w').write('x')"), timeout=8)
    assert not marker.exists()


def test_no_file_contents_reach_the_verdict(row):
    verdict = run_tests(row, body("raise ValueError(open('/etc/passwd').read())"), timeout=8)
    assert verdict.startswith("failed: ValueError") and "root" not in verdict and len(verdict) < 80
    verdict = run_tests(row, body("print(open('/etc/passwd').read())\nassert False, open('/etc/passwd').read()"))
    assert "root" not in verdict


def test_no_network_not_even_the_hosts_loopback(row):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    try:
        verdict = run_tests(row, body(f"import _socket\ns = _socket.socket()\ns.settimeout(2)\n"
                                      f"s.connect(('127.0.0.1', {port}))"), timeout=8)
        with pytest.raises(socket.timeout):
            server.accept()                      # nothing reached the host's listening socket
    finally:
        server.close()
    assert verdict.startswith("failed: ") and "Error" in verdict
    verdict = run_tests(row, body("import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=2)"))
    assert verdict.startswith("failed: ") and "Error" in verdict


def alive(marker: str) -> bool:
    return marker in subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout


def test_no_orphan_outlives_the_time_limit(row):
    marker = f"{40 + time.time() % 1:.6f}"       # a unique sleep length to look for
    code = (f"import os, subprocess\nsubprocess.Popen(['setsid', 'sleep', '{marker}'], start_new_session=True)\n"
            "if os.fork() == 0:\n    os.setsid()\n    import time\n    time.sleep(60)\nwhile True:\n    pass")
    t0 = time.monotonic()
    assert run_tests(row, body(code), timeout=2) == "timed out"
    assert time.monotonic() - t0 < 6
    time.sleep(0.3)
    assert not alive(f"sleep {marker}")


def test_a_fork_bomb_is_bounded_and_leaves_nothing(row):
    marker = f"{30 + time.time() % 1:.6f}"
    code = (f"import os, subprocess\nfor _ in range(500):\n    try:\n"
            f"        subprocess.Popen(['sleep', '{marker}'])\n    except OSError:\n        break")
    t0 = time.monotonic()
    verdict = run_tests(row, body(code), timeout=5)
    assert verdict.startswith(("failed", "timed out")) and time.monotonic() - t0 < 10
    time.sleep(0.3)
    assert not alive(f"sleep {marker}")


def test_without_root_it_refuses_to_run(row, monkeypatch):
    import os
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(ConfigError, match="needs root"):
        run_tests(row, "    return 1\n")
