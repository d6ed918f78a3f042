"""Hostile calls over raw HTTP, as a script sends them, after a session has been through every kind of update
(a Run, Branch here, the tour, a Sweep, opening its point): every event the page has, the browser-only ones too,
with hostile values, file data naming files outside the app, the wrong number of inputs, and a second event
stream on one session. Each call ends with a message (never an error without one), the server logs at most 1 KB
per call and no traceback; an event costs the server no more after ~900 events than among the first. One app for the
module (marked ``load``)."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
import uuid

import pytest

from engine import settings
from tests.conftest import running_app
from tools.page.bench_abandon import cpu_seconds
from tools.page.bench_memory import call

pytestmark = pytest.mark.load
BODY_LIMIT = settings.SETTINGS["UNMASK_MAX_BODY"].default
EMPTY_EVENTS = 800      # empty events the growth check times: a cost that grows with each shows by the last hundred

# (lists, dicts and NaN go to every handler in-process too: tests/test_fuzz_endpoints.py)
HOSTILE = [None, 1e308, "<img src=x onerror=alert(1)>", "x" * 1_000_000,
           {"path": "/etc/passwd", "meta": {"_type": "gradio.FileData"}},
           {"path": "app.py", "url": "http://127.0.0.1/file=app.py", "meta": {"_type": "gradio.FileData"}}]


def initial(cfg: dict, dep: dict) -> list:
    """The page's starting values of an event's inputs (a gr.State is the server's: None)."""
    comps = {c["id"]: c for c in cfg["components"]}
    return [None if comps[i]["type"] == "state" else comps[i].get("props", {}).get("value") for i in dep["inputs"]]


def one_per_handler(cfg: dict) -> list[dict]:
    seen, out = set(), []
    for d in cfg["dependencies"]:
        name = d.get("api_name") or f"#{d['id']}"
        base = name.rstrip("_0123456789") if name.startswith(("on_run", "draw", "partial", "lambda")) else name
        if base not in seen:
            seen.add(base)
            out.append(d)
    return out


def updated_session(url: str, cfg: dict) -> str:
    """A session that ran every handler once with the page's own values: a Run, Branch here at step 2 of it (the
    candidates radio updated), the tour's stops, a Sweep (its settings' dropdown updated), its point opened."""
    session = uuid.uuid4().hex[:11]
    runs_first = sorted(one_per_handler(cfg), key=lambda d: not (d.get("api_name") or "").startswith("on_run"))
    for d in runs_first:                  # a run first, so Branch here and the rest have a run to act on
        if d.get("backend_fn", True) and d["inputs"] and d.get("api_name") != "decode":
            values = initial(cfg, d)
            if len(values) == 4 and values[:2] == [None, None] and values[2:] in ([None, None], [0, 0]):
                values[2:] = [2, -1]          # Branch here: a step and no position (as the page's JS sends)
            done = call(url, d["id"], values, session)
            if len(values) == 4 and values[2:] == [2, -1]:
                assert done.get("success"), done          # Branch here updated the candidates radio
    return session


def two_streams(url: str, cfg: dict, session: str) -> bool:
    """Two event streams on one session at once: a stream that finds its session's events taken ends (or waits)
    without a result; whether both ended and one answered. The waiting one is left after 5 s without a line (a
    browser that closed its tab): the answer comes at once, and the waiting one's next line is a heartbeat, every
    15 s (this file alone: 37.4 -> 32.2 s)."""
    ended = []

    def stream(dep):
        try:
            ended.append(call(url, dep["id"], [None] * len(dep["inputs"]), session, timeout_s=5, total_s=20))
        except (RuntimeError, OSError):
            ended.append(None)
    streams = [threading.Thread(target=stream, args=(d,)) for d in cfg["dependencies"][:2]]
    for t in streams:
        t.start()
    for t in streams:
        t.join(90)
    return len(ended) == 2 and any(ended)


def test_hostile_calls_after_every_update_get_a_message_a_short_log_and_no_traceback(tmp_path):
    with running_app(tmp_path, forked=True, UNMASK_MAX_SECONDS="3") as (url, proc):
        cfg = json.load(urllib.request.urlopen(url + "config"))
        session = updated_session(url, cfg)
        log = tmp_path / "app.log"
        before, calls, silent, costs = log.stat().st_size, 0, [], []

        def check(dep, data, what):
            nonlocal calls
            calls += 1
            spent = cpu_seconds(proc.pid)
            try:
                done = call(url, dep["id"], data, session)
                if not data:          # no inputs: the browser-only events (and a one-input event sent none)
                    costs.append(cpu_seconds(proc.pid) - spent)
            except urllib.error.HTTPError as e:      # a body over UNMASK_MAX_BODY (413), or with more lists
                # and objects than any request of the page (400: file data in many inputs): refused before it is kept
                if e.code not in (400, 413) or e.read().decode().count("\n") != 1:
                    silent.append(f"{dep.get('api_name')}: {what}: HTTP {e.code}")
                return
            except (urllib.error.URLError, ConnectionError) as e:
                # the server answered 413 and closed while urllib still sent the body (tests/test_bytes.py reads
                # that answer over a raw socket)
                if len(json.dumps(data)) <= BODY_LIMIT or not isinstance(getattr(e, "reason", e), ConnectionError):
                    silent.append(f"{dep.get('api_name')}: {what}: {e}")
                return
            if not done.get("success") and not (done.get("output") or {}).get("error"):
                silent.append(f"{dep.get('api_name')}: {what}")

        for d in one_per_handler(cfg):
            n = len(d["inputs"])
            for i, value in enumerate(HOSTILE):
                check(d, [value] * n, f"hostile {i}")
            if n:
                check(d, [None] * (n - 1), "one input short")
        empty = [d for d in one_per_handler(cfg) if not d["inputs"]]
        for i in range(max(0, EMPTY_EVENTS - len(costs))):     # the growth check's events: as many as a page sends
            check(empty[i % len(empty)], [], "no inputs again")
        assert two_streams(url, cfg, session)
        grown = log.stat().st_size - before
        text = log.read_text()
    first, last = sum(costs[:100]), sum(costs[-100:])
    print(f"{calls} hostile calls after every update: {len(silent)} silent errors, {grown / calls:.0f} B of log each; "
          f"the server's CPU for 100 empty events: {first:.2f} s among the first, {last:.2f} s among the last")
    assert calls >= 120 and not silent, silent[:10]
    # an event costs the server what it cost a thousand events earlier: gradio's own traffic summary, recomputed
    # with pandas over its last 10 000 events after each event, made the last 100 cost 21.4 CPU-s, the first 4.6
    # (explorer.page.startup.quiet_queue)
    assert len(costs) >= EMPTY_EVENTS and last < 1.5 * first + 0.5, (first, last)
    assert "Traceback" not in text, text[text.index("Traceback"):][:1500]
    assert grown <= 1024 * calls


def test_a_second_stream_on_a_session_is_logged_in_one_line_and_other_errors_keep_their_traceback():
    import logging
    import sys

    from fastapi.exceptions import HTTPException

    from explorer.page.serverlog import STARTED, ClosedStream

    def record(exc):
        try:
            raise exc
        except Exception:
            return logging.LogRecord("uvicorn.error", logging.ERROR, __file__, 1, "Exception in ASGI application\n",
                                     None, sys.exc_info())
    closed = RuntimeError(STARTED)
    closed.__cause__ = HTTPException(status_code=404)
    r = record(closed)
    assert ClosedStream().filter(r) and r.exc_info is None and "\n" not in r.getMessage()
    other = record(RuntimeError("a bug"))
    assert ClosedStream().filter(other) and other.exc_info is not None
