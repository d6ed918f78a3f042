"""The page's scripts and styles from memory, compressed once (``explorer.page.assets_cache``): the second request
for an asset never reaches the app and gets the same bytes, which decompress to the file; gradio's brotli middleware
passes them on as they are; a Range, a conditional request, another path, a missing file or a HEAD goes through
untouched. A tiny Starlette app with a FileResponse route, as gradio serves its assets."""

from __future__ import annotations

import gzip

import brotli
import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import FileResponse, PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from explorer.page import assets_cache
from gradio.brotli_middleware import BrotliMiddleware

SCRIPT = ("const x = 1;\n" * 5000).encode()


@pytest.fixture
def client(tmp_path):
    (tmp_path / "index-abc.js").write_bytes(SCRIPT)
    served = []

    async def asset(request):
        served.append(request.url.path)
        f = tmp_path / request.path_params["name"]
        return FileResponse(f) if f.is_file() else PlainTextResponse("missing", status_code=404)

    async def page(request):
        served.append(request.url.path)
        return PlainTextResponse("<html>" + "x" * 2000)
    app = Starlette(routes=[Route("/assets/{name}", asset, methods=["GET", "HEAD"]), Route("/", page)],
                    middleware=[Middleware(BrotliMiddleware), Middleware(assets_cache.AssetCache)])
    return TestClient(app), served


def test_an_asset_is_read_and_compressed_once_then_served_from_memory(client):
    c, served = client
    for how, decode in (("br", brotli.decompress), ("gzip", gzip.decompress), ("identity", bytes)):
        first = c.get("/assets/index-abc.js", headers={"Accept-Encoding": how})
        again = c.get("/assets/index-abc.js", headers={"Accept-Encoding": how})
        assert first.status_code == again.status_code == 200
        assert first.headers.get("content-encoding", "identity") == how == again.headers.get("content-encoding",
                                                                                            "identity")
        assert first.headers["etag"] == again.headers["etag"] and "javascript" in again.headers["content-type"]
        assert first.content == again.content == SCRIPT            # httpx decodes br and gzip itself
    assert served == ["/assets/index-abc.js"] * 3                   # once per encoding, never again
    body = c.get("/assets/index-abc.js", headers={"Accept-Encoding": "br"})
    assert int(body.headers["content-length"]) < len(SCRIPT) / 20 and assets_cache.brotli.decompress(
        assets_cache.compressed(SCRIPT, "br")) == SCRIPT


def test_what_is_not_a_plain_asset_request_goes_through(client):
    c, served = client
    c.get("/assets/index-abc.js", headers={"Accept-Encoding": "br"})
    ranged = c.get("/assets/index-abc.js", headers={"Range": "bytes=0-9", "Accept-Encoding": "br"})
    assert ranged.status_code == 206 and ranged.content == SCRIPT[:10]
    etag = ranged.headers["etag"]
    assert c.get("/assets/index-abc.js", headers={"If-None-Match": etag}).status_code in (200, 304)
    assert c.head("/assets/index-abc.js").status_code == 200
    for _ in range(2):
        assert c.get("/assets/gone.js").status_code == 404               # an error is never kept
        assert c.get("/", headers={"Accept-Encoding": "br"}).status_code == 200
    assert served == ["/assets/index-abc.js"] * 4 + ["/assets/gone.js", "/", "/assets/gone.js", "/"]
