"""A gone client's work stops, on every path (``explorer.page.presence``): the real app on a loopback port, a heavy
request on each path (``tools.page.bench_abandon``: AR over 256 slots without a cache, ~9 s of forwards; a
48-setting sweep), the visitor leaves once the server is busy (closes its stream and heartbeat, or never opened
one), and the server's CPU in the seconds after is measured. Work left running would use a core (about 2 CPU-s in
the two seconds measured); stopped work leaves the server's idle ~0.1. Bounded: eight requests, loopback, ~1 min."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest

from tests.conftest import running_app
from tools.page.bench_abandon import after, busy, start

pytestmark = pytest.mark.load

PATHS = ("decode", "decode-unopened", "branch", "compare", "sweep", "run", "page-branch", "gif")


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    with running_app(tmp_path_factory.mktemp("abandon"), forked=True, UNMASK_MAX_SECONDS="60") as (url, proc):
        yield url, proc, json.load(urllib.request.urlopen(url + "config", timeout=30))


# once more on a failure: the check reads [1, 3] s after leaving, and a loaded host stretches any stretch of work
# without a presence check into it (the GIF's layout, 1.6 CPU-s unchecked, read 0.81 and 0.84 there before it was
# cut to 0.04 s); work left running reads ~2 CPU-s in both attempts
@pytest.mark.flaky(reruns=1)
@pytest.mark.parametrize("path", PATHS)
def test_a_gone_clients_work_stops(app, path):
    url, proc, cfg = app
    visitor = start(path, url, cfg)
    if path == "decode-unopened":       # its stream never opens: the gate ends it before the engine sees it
        cpu = after(proc.pid, window_s=3.0)             # (explorer.page.presence.confirm, GRACE_S = 2 s)
        visitor.leave()
        assert cpu["first_s"] + cpu["next2_s"] < 0.5, cpu
        return
    busy(proc.pid, path)
    visitor.leave()
    cpu = after(proc.pid, window_s=3.0)
    print(f"{path}: CPU-s {cpu['first_s']:.2f} in the first second after leaving, {cpu['next2_s']:.2f} in the next "
          "two")
    # the never-opened stream is noticed 2 s after the request arrived (presence.GRACE_S), about 1 s after leaving
    assert cpu["next2_s"] < 0.5, cpu
    time.sleep(0.3)
