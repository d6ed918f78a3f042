"""Bytes bounded per request (``explorer.page.bodylimit``), over raw HTTP against the real app on a loopback port
with ``SPACE_ID`` set, as a Space runs it: 50 MB bodies, declared or chunked, to gradio's routes leave the server's
RSS within 20 MiB of where it was (before: a few such requests took gigabytes, never given back), each refused with
a one-line 413; an upload is refused (405); a text longer than its box takes is refused before it waits. One app for
the module (marked ``load``). In process: every gradio route the app does not use refused, a body of nested lists
refused before gradio parses it, and every input held to one value of bounded size."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import urllib.request

import pytest

from explorer.page.bodylimit import BodyLimit
from tests.conftest import running_app
from tools.local_app import ROOT
from tools.page.bench_memory import call, rss_mib

pytestmark = pytest.mark.load
MB50 = 50 * 1000 * 1000
ROUTES = ["/gradio_api/queue/join", "/gradio_api/call/decode", "/gradio_api/upload"]


def send_big(port: int, path: str, chunked: bool, size: int = MB50) -> bytes:
    """POST ``size`` bytes of JSON-looking junk (with a Content-Length, or chunked), as far as the server reads
    them; its answer's first line."""
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    head += "Transfer-Encoding: chunked\r\n\r\n" if chunked else f"Content-Length: {size}\r\n\r\n"
    piece = b'{"data": ["' + b"x" * (1 << 16) + b'"]}'
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(head.encode())
        sent = 0
        try:
            while sent < size:
                s.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
                sent += len(piece)
            if chunked:
                s.sendall(b"0\r\n\r\n")
        except OSError:             # the server answered and closed: the rest was never read
            pass
        answer = b""
        try:
            while b"\r\n\r\n" not in answer:
                got = s.recv(4096)
                if not got:
                    break
                answer += got
        except OSError:
            pass
    return answer


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("bytes")
    with running_app(workdir, forked=True, SPACE_ID="someone/unmask") as (url, proc):
        yield url, proc, workdir


def test_fifty_megabyte_bodies_are_refused_before_they_are_kept(app):
    url, proc, _ = app
    port = int(url.rstrip("/").rsplit(":", 1)[1])
    urllib.request.urlopen(url + "config").read()
    before = rss_mib(proc.pid)
    answers = [send_big(port, path, chunked) for path in ROUTES for chunked in (False, True)]
    after = rss_mib(proc.pid)
    print(f"RSS {before:.0f} -> {after:.0f} MiB after {len(answers)} bodies of 50 MB")
    for path, answer in zip([p for p in ROUTES for _ in range(2)], answers):
        line = answer.split(b"\r\n", 1)[0]
        assert line.split()[1:2] in ([b"413"], [b"405"]), (path, answer[:300])
    assert after - before <= 20, (before, after)


def test_an_upload_is_refused_and_a_body_within_the_limit_still_served(app):
    url, proc, workdir = app
    temp = workdir / "cache" / "gradio"                   # gradio's temporary folder is the app's own, 0700
    assert temp.is_dir() and temp.stat().st_mode & 0o777 == 0o700
    env = {k: v for k, v in os.environ.items() if k != "GRADIO_TEMP_DIR"}
    env["UNMASK_CACHE_DIR"] = str(workdir / "cache")
    code = "import app, gradio.route_utils as r; print(r.DEFAULT_TEMP_DIR)"      # as gradio reads it once imported
    seen = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120).stdout.split()
    assert seen[-1:] == [str(temp)]                       # the app's gradio writes there, not in /tmp/gradio
    req = urllib.request.Request(url + "gradio_api/upload", b"--x--\r\n", {"Content-Type": "multipart/form-data"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req)
    assert e.value.code == 405 and e.value.read().decode().count("\n") == 1
    cfg = json.load(urllib.request.urlopen(url + "config"))
    dep = next(d for d in cfg["dependencies"] if d.get("api_name") == "decode")
    done = call(url, dep["id"], ["x" * 2001, "ar", "", ""], "s1", total_s=30)
    assert not done.get("success") and "2000" in str(done["output"]["error"])   # refused before it waits
    done = call(url, dep["id"], ["x" * 9000, "ar", "", ""], "s2", total_s=30)
    assert not done.get("success") and "at most 8000" in str(done["output"]["error"])   # the input guard's


def test_a_chunked_body_is_cut_at_the_limit_and_answered_413_in_one_line():
    sent, seen = [], {"read": 0}

    async def app(scope, receive, send):           # a route that reads its whole body, as gradio's do
        while True:
            m = await receive()
            if m["type"] == "http.disconnect":
                raise RuntimeError("client disconnected")
            seen["read"] += len(m.get("body", b""))
            if not m.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    async def run(n_chunks: int):
        chunks = [{"type": "http.request", "body": b"x" * 1000, "more_body": True}] * n_chunks
        chunks.append({"type": "http.request", "body": b"", "more_body": False})
        it = iter(chunks)

        async def receive():
            return next(it)

        async def send(m):
            sent.append(m)
        scope = dict(type="http", method="POST", path="/gradio_api/queue/join", headers=[])
        await BodyLimit(app, limit=10_000)(scope, receive, send)
    asyncio.run(run(5))
    assert sent[0]["status"] == 200
    sent.clear()
    asyncio.run(run(1000))
    assert [m.get("status") for m in sent] == [413, None] and seen["read"] <= 5000 + 11_000
    assert sent[1]["body"].decode().count("\n") == 1


def test_a_body_of_nested_lists_is_refused_before_gradio_parses_it():
    """Issue 65: a ~1 MB ``[[[...]]]`` under the body limit cost gradio ~1.5 CPU-s on the event loop and ~50 MiB kept
    in the session. Refused at the edge (400, one line) by its count of lists and objects, strings' brackets aside;
    the page's own bodies, brackets in a prompt included, reach the route whole."""
    piece = b"[" * 50 + b"]" * 50
    crafted = b'{"data": [' + b",".join([piece] * 9000) + b'], "fn_index": 3}'
    page = json.dumps({"data": ["[[{{ a prompt ]]}\"[", True, 0.9, None], "event_data": {"index": [1, 2]},
                       "fn_index": 3, "session_hash": "s"}).encode()
    for body, status in ((crafted, 400), (page, 200)):
        sent, got = [], []

        async def app(scope, receive, send):
            got.append((await receive())["body"])
            await send({"type": "http.response.start", "status": 200, "headers": []})

        halves = iter([{"type": "http.request", "body": body[:len(body) // 2], "more_body": True},
                       {"type": "http.request", "body": body[len(body) // 2:], "more_body": False}])

        async def receive():
            return next(halves)

        async def send(m):
            sent.append(m)
        scope = dict(type="http", method="POST", path="/gradio_api/queue/join", headers=[])
        asyncio.run(BodyLimit(app)(scope, receive, send))
        assert sent[0]["status"] == status and got == ([body] if status == 200 else [])
        assert status == 200 or sent[1]["body"].decode().count("\n") == 1
    assert len(crafted) < 1 << 20


def test_cheap_checks_come_first_and_messages_stay_short():
    import gradio as gr

    from engine.catalogue.catalogue import validate
    from engine.errors import ConfigError
    from engine.runtime.branch import parse_branch
    from explorer.page.bounds import unbounded
    from engine.harness.service import DecodeService
    with pytest.raises(ConfigError, match="0 or more"):          # before its base run is decoded
        parse_branch('{"step": -1}')
    bare = DecodeService.__new__(DecodeService)                   # no model: a decode would fail otherwise
    with pytest.raises(ConfigError, match="tau must be in"):      # the branch's spec too (issue 65)
        next(bare.branch_stream("2+2=", "threshold", {}, None, '{"step": 1, "spec": "threshold:tau=7"}'))
    assert bare.check_branch('{"step": 1, "spec": "edit:tau=0.8"}', "threshold", {"gen_length": 32}) is None
    from explorer.state import parse_query                        # a link's branch: read before its base run
    assert parse_query({"branch": '{"step": 1, "spec": "threshold:tau=7"}'}) == ({}, [
        "branch: tau must be in (0.05, 1] on this page"])
    with pytest.raises(ConfigError) as e:
        validate("threshold", {f"junk{i}": 1 for i in range(3000)})
    assert len(str(e.value)) < 400 and "and 2995 more" in str(e.value)
    box, prompt = gr.Textbox(), gr.Textbox(max_length=2000)
    assert unbounded([box, prompt], ["x" * 8000, "y" * 2000]) is None
    assert "at most 2000" in unbounded([box, prompt], ["x", "y" * 2001])
    assert "at most 8000" in unbounded([box, prompt], ["x" * 8001, "y"])
    # issue 65: nested JSON under the body limit was kept in the session (about 50 MiB a session) before gradio's
    # own check refused it; every control takes a single value, and a choice a short one
    nested = []
    for _ in range(100_000):
        nested = [nested]
    controls = [gr.Checkbox(), gr.Dropdown(["a"], allow_custom_value=True), gr.Slider(), gr.State(), box]
    assert unbounded(controls, [True, "a", 3.5, {"any": "thing"}, "x"]) is None     # a State's value is not read
    for i, bad in enumerate([nested, "y" * 201, {"value": 1}, None, ["x"]]):
        values = [True, "a", 3.5, None, "x"]
        values[i] = bad
        assert (unbounded(controls, values) is None) == (i == 3), i


# (method, route) of every gradio route the page or the API uses: the only ones let through
USED = {("GET", p) for p in (
    "/", "/config", "/config/", "/favicon.ico", "/theme.css", "/robots.txt", "/manifest.json", "/assets/{path:path}",
    "/static/{path:path}", "/svelte/{path:path}", "/gradio_api/info", "/gradio_api/info/", "/gradio_api/app_id",
    "/gradio_api/app_id/", "/gradio_api/startup-events", "/gradio_api/theme.css",
    "/gradio_api/heartbeat/{session_hash}",
    "/gradio_api/queue/data", "/gradio_api/call/{api_name}/{event_id}", "/gradio_api/file={path_or_url:path}")} | {
    ("HEAD", "/"), ("HEAD", "/gradio_api/file={path_or_url:path}")} | {("POST", p) for p in (
        "/gradio_api/queue/join", "/gradio_api/cancel", "/gradio_api/reset", "/gradio_api/reset/",
        "/gradio_api/call/{api_name}", "/gradio_api/call/{api_name}/")}


def gradio_routes(routes):
    """(method, path template) of every route in a starlette route table, included routers walked."""
    for r in routes:
        if hasattr(r, "original_router"):
            yield from gradio_routes(r.original_router.routes)
        else:
            for method in getattr(r, "methods", None) or ():
                yield method, r.path


def test_every_route_gradio_serves_but_the_app_does_not_use_is_refused():
    """gradio's whole route table walked (the app adds no route of its own, so a one-box page has the page's
    table, without the page's slow imports): each route, its parameters filled, sent through the middleware. The
    routes the page and the API use reach gradio; every other one is refused with one line before gradio sees it
    (before: ``process_recording`` stored and echoed a file and ran ffmpeg)."""
    import re
    import gradio as gr
    from gradio.routes import App
    with gr.Blocks() as demo:
        gr.Textbox()
    table = sorted(set(gradio_routes(App.create_app(demo).routes)))
    assert ("POST", "/gradio_api/process_recording") in table and USED <= set(table), USED - set(table)
    answers = []

    async def gradio(scope, receive, send):
        answers.append(200)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def through(method, path):
        async def send(message):
            if message["type"] == "http.response.start":
                answers.append(message["status"])
            elif message["type"] == "http.response.body" and answers[-1] != 200:
                assert message["body"].decode().count("\n") == 1
        async def receive():
            return {"type": "http.request", "body": b"{}"}
        scope = {"type": "http", "method": method, "path": path, "root_path": "", "headers": []}
        await BodyLimit(gradio)(scope, receive, send)
        return answers[-1]
    refused = []
    for method, template in table:
        path = re.sub(r"\{[^}]+\}", "x1", template)
        status = asyncio.run(through(method, path))
        assert (status == 200) == ((method, template) in USED), (method, template, status)
        refused += [template] if status != 200 else []
    assert "/gradio_api/process_recording" in refused and len(refused) >= 50, len(refused)
