"""The page's frame guard (``explorer.page.frame_guard``, ``assets/js/frame_guard.js``): the page's HTML carries the
script first in its head, before any of gradio's scripts, under gradio's compression middleware as the app has it;
nothing else is touched (another path, another method, an answer that is not HTML or not 200). A tiny Starlette
app, as gradio serves its page; the browser side (an idle page asks for no frames) is ``tests/test_browser.py``."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import HTMLResponse, JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from explorer.page import frame_guard
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


def test_the_guard_diverts_the_status_trackers_frames_only():
    """The script itself: only a caller from gradio's status-tracker chunk is diverted to a 100 ms timer."""
    js = frame_guard.SCRIPT.decode()
    assert r"/\/statustracker-[^/]*\.js/" in js and "setTimeout(() => f(performance.now()), 100)" in js
    assert ": frame(f)" in js                                   # every other caller gets a real frame
