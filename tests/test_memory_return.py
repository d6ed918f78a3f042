"""Memory is given back: freed pages returned to the system once sessions go or a burst of requests ends
(issue 74: the server's RSS stayed at its peak after the visitors left)."""

from __future__ import annotations

import asyncio
import ctypes
import datetime

import gradio as gr
import pytest

from explorer.page import sessions
from explorer.page.sessions import Sweeper, give_back_memory
from tests.test_sessions import holder_with


def rss_mib() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


@pytest.mark.skipif(sessions._glibc() is None, reason="malloc_trim is glibc's")
def test_freed_heap_memory_goes_back_to_the_system():
    """200 MiB of 64 KiB blocks (below malloc's mmap threshold: they live in its heap) freed, all but the last
    (which pins the heap's top): the pages stay in the process until ``give_back_memory``."""
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype, libc.free.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
    blocks = [libc.malloc(64 * 1024) for _ in range(3200)]
    for b in blocks:
        ctypes.memset(b, 1, 64 * 1024)
    for b in blocks[:-1]:
        libc.free(b)
    held = rss_mib()
    assert give_back_memory()
    assert held - rss_mib() > 150
    libc.free(blocks[-1])


def test_memory_is_given_back_when_sessions_go_and_when_a_burst_ends_never_while_busy():
    h, now = holder_with({"old": 700, "fresh": 1})
    s = Sweeper(set(), idle_s=600, every_s=5)
    assert s.sweep(h, now) and "old" not in h.session_data          # a session let go
    assert not s.sweep(h, now + datetime.timedelta(seconds=6))      # nothing new since: the trim is not repeated
    h.time_last_used["fresh"] = now + datetime.timedelta(seconds=10)
    assert not s.sweep(h, now + datetime.timedelta(seconds=12))     # requests still coming
    assert s.sweep(h, now + datetime.timedelta(seconds=16))         # quiet for a sweep's interval: the burst ended
    assert not s.sweep(h, now + datetime.timedelta(seconds=21))


def test_the_server_s_sweeper_gives_memory_back_once_idle_sessions_expire(monkeypatch):
    """gradio's own app and lifespan: a session idle past the idle time goes, and the trim runs (off the event
    loop)."""
    trims = []
    monkeypatch.setattr(sessions, "give_back_memory", lambda: trims.append(1) or True)
    with gr.Blocks() as demo:
        gr.Textbox()
    app = gr.routes.App.create_app(demo)

    async def serve():
        async with sessions.lifespan(idle_s=0.2)(app):
            app.state_holder["s"]
            app.state_holder.time_last_used["s"] = datetime.datetime.now() - datetime.timedelta(seconds=60)
            for _ in range(50):
                await asyncio.sleep(0.05)
                if trims:
                    break
    asyncio.run(serve())
    assert trims and "s" not in app.state_holder.session_data
