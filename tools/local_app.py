"""The real app (``python app.py``) in a subprocess on a free loopback port, for the browser tests and
``tools.page.bench_page``."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tools.app_forkserver import fork_app

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_app(workdir: Path, root: Path = ROOT, start_s: float = 120, forked: bool = False, **env_extra):
    """The real app (python app.py of the checkout at ``root``) on a free loopback port; yields (URL, process),
    stops it afterwards. ``start_s``: how long its start may take (a loaded machine's import of torch is slow).
    ``forked``: a fork of a process with torch and transformers imported (``tools.app_forkserver``, the tests'
    way: about half a start's CPU), not a fresh interpreter."""
    port = free_port()
    env = dict(os.environ, GRADIO_SERVER_NAME="127.0.0.1", GRADIO_SERVER_PORT=str(port),
               UNMASK_CACHE_DIR=str(workdir / "cache"), GRADIO_ANALYTICS_ENABLED="False", UNMASK_THREADS="1")
    env.update(env_extra)
    if forked:
        proc = fork_app(str(root), env, str(workdir / "app.log"))
    else:
        with open(workdir / "app.log", "w") as log:
            proc = subprocess.Popen([sys.executable, "app.py"], cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.time() + start_s
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2)
            break
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError("the app exited during start-up: " + (workdir / "app.log").read_text()[-2000:])
            time.sleep(0.5)
    else:
        proc.kill()
        raise RuntimeError(f"the app did not start in {start_s:g} s")
    try:
        yield url, proc
    finally:
        proc.terminate()
        proc.wait(timeout=20)
