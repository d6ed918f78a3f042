"""The page's frame guard (``explorer.page.frame_guard``, ``assets/js/frame_guard.js``): the page's HTML carries the
script first in its head, before any of gradio's scripts, under gradio's compression middleware as the app has it;
nothing else is touched (another path, another method, an answer that is not HTML or not 200). A tiny Starlette
app, as gradio serves its page; the browser side (an idle page asks for no frames) is ``tests/test_browser.py``."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess

import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import HTMLResponse, JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from explorer.page import frame_guard
from explorer.page.context import js
from gradio.brotli_middleware import BrotliMiddleware

PAGE = "<!doctype html><html lang='en'><head><meta charset='utf-8'><script>window.g = 1;</script></head>" + \
       "<body>" + "<p>x</p>" * 500 + "<head></head></body></html>"


def client(status=200, page=PAGE):
    async def index(request):
        return HTMLResponse(page, status_code=status)

    async def other(request):
        return HTMLResponse(PAGE) if request.url.path != "/config" else JSONResponse({"head": "<head>"})
    app = Starlette(routes=[Route("/", index, methods=["GET", "POST", "HEAD"]), Route("/other", other),
                            Route("/config", other)],
                    middleware=[Middleware(BrotliMiddleware), Middleware(frame_guard.FrameGuard)])
    return TestClient(app)


def test_the_page_carries_the_guard_first_in_its_head():
    r = client().get("/?decoder=llada", headers={"Accept-Encoding": "br"})
    assert r.status_code == 200
    body = r.text
    assert body.startswith("<!doctype html><html lang='en'><head>" + frame_guard.SCRIPT.decode())
    assert body.count("statustracker") == 1 and body.index("statustracker") < body.index("window.g")
    assert body == PAGE.replace("<head>", "<head>" + frame_guard.SCRIPT.decode(), 1)    # the rest as it was
    plain = client().get("/", headers={"Accept-Encoding": "identity"})
    assert int(plain.headers["content-length"]) == len(plain.content) == len(PAGE) + len(frame_guard.SCRIPT)


def test_anything_else_goes_through_untouched():
    c = client()
    assert c.get("/other").text == PAGE and c.get("/config").json() == {"head": "<head>"}
    assert c.post("/").text == PAGE and c.head("/").text == ""
    assert client(status=404).get("/").text == PAGE          # an error page is not rewritten
    assert client(page="<p>no head</p>").get("/").text == "<p>no head</p>"


def test_an_answer_it_does_not_rewrite_is_passed_on_as_it_comes():
    """A stream at ``/`` (not plain HTML) reaches the client chunk by chunk: the app sends its second chunk only
    once the first has gone out (a guard that held every answer of ``/`` until its end would never let it)."""
    async def serve():
        first_out, got = asyncio.Event(), []

        async def stream(scope, receive, send):
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/event-stream")]})
            await send({"type": "http.response.body", "body": b"one", "more_body": True})
            await asyncio.wait_for(first_out.wait(), 5)
            await send({"type": "http.response.body", "body": b"two"})

        async def send(message):
            got.append(message.get("body"))
            if message.get("body") == b"one":
                first_out.set()
        await frame_guard.FrameGuard(stream)({"type": "http", "method": "GET", "path": "/"}, None, send)
        return got
    assert asyncio.run(serve()) == [None, b"one", b"two"]


# the script run in node (Playwright's own, or the system's) with stand-ins for the browser's frame functions: a
# caller whose stack is in the tracker's chunk, two of its frames (one cancelled), and a frame of another caller
DIVERTED = """const vm = require('vm'); globalThis.window = globalThis; const log = [], ticks = [];
window.requestAnimationFrame = (f) => { log.push('frame'); return 1; };
window.cancelAnimationFrame = (id) => log.push('cancel ' + id);
GUARD
const tracker = vm.runInThisContext('(ask) => ask()', {filename: 'http://h/assets/statustracker-Ab1.js'});
const a = tracker(() => requestAnimationFrame((t) => ticks.push(['a', typeof t])));
const b = tracker(() => requestAnimationFrame(() => ticks.push(['b'])));
const c = requestAnimationFrame(() => ticks.push(['c']));
cancelAnimationFrame(b); cancelAnimationFrame(c);
setTimeout(() => console.log(JSON.stringify({a, b, c, log, ticks})), 300);"""


def node() -> str:
    try:
        from playwright._impl._driver import compute_driver_executable
        return str(compute_driver_executable()[0])
    except ImportError:
        return shutil.which("node") or pytest.skip("no node to run the script in")


def test_the_guard_diverts_the_status_trackers_frames_only_and_cancels_its_own():
    """The script itself: a frame asked for from gradio's status-tracker chunk runs from a timer (a negative
    number, so cancelling it stops that timer); every other caller's frame and cancel reach the browser's."""
    code = DIVERTED.replace("GUARD", js("frame_guard.js"))
    out = json.loads(subprocess.run([node(), "-e", code], capture_output=True, text=True, timeout=30,
                                    check=True).stdout)
    assert out["a"] < 0 and out["b"] < 0 and out["a"] != out["b"] and out["c"] == 1
    assert out["ticks"] == [["a", "number"]]                  # b was cancelled; c is the browser's to run
    assert out["log"] == ["frame", "cancel 1"]                # only c reached the browser's frame functions
