"""Who a request comes from (``explorer.page.proxy``: a Space's X-Forwarded-For read right to left, forged entries
changing nothing) and whether its client is still there (``explorer.page.presence``: each session's open event
streams; ``worker.follow`` stops a gone client's work and draws nothing more)."""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace

import pytest

from explorer.page import presence
from explorer.page.presence import Gone, Presence, Streams, stream_session
from explorer.page.bodylimit import BodyLimit
from explorer.page.proxy import SpaceClient, client_key, forwarded_client
from explorer.page.worker import follow


def installed() -> Streams:
    s = Streams()
    s.installed = True
    return s


def test_a_session_is_present_while_a_stream_is_open_and_gone_once_they_close():
    s = installed()
    t0 = time.monotonic()
    assert s.present("a", t0)                     # not yet opened: within the grace
    s.opened("a")
    s.opened("a")                                 # the page's heartbeat and its data stream
    s.closed("a")
    assert s.present("a", t0)
    s.closed("a")
    assert not s.present("a", t0)                 # closed after the request arrived
    assert s.present("a", time.monotonic() + 1e-3)   # a later request of that session gets its grace
    assert Streams().present("a", t0 - 100)       # not installed: everyone is present
    assert installed().present(None, t0 - 100)    # no session (an in-process call)


def test_a_client_that_never_opens_its_stream_is_gone_after_the_grace(monkeypatch):
    monkeypatch.setattr(presence, "GRACE_S", 0.05)
    s = installed()
    t0 = time.monotonic()
    assert s.present("b", t0)
    time.sleep(0.06)
    assert not s.present("b", t0)


def test_the_streams_remembered_are_bounded(monkeypatch):
    monkeypatch.setattr(presence, "REMEMBERED", 10)
    s = installed()
    for i in range(50):
        s.opened(str(i))
        s.closed(str(i))
    assert len(s.closed_at) == 10 and not s.open


def scope(path: str, query: bytes = b"", app=None, method: str = "GET") -> dict:
    return dict(type="http", method=method, path=path, query_string=query, headers=[], app=app)


def test_the_event_streams_are_recognised_and_a_calls_event_names_its_session():
    queue = SimpleNamespace(event_ids_to_events={"e1": SimpleNamespace(session_hash="s1")},
                            pending_event_ids_session={"s2": {"e2"}})
    app = SimpleNamespace(get_blocks=lambda: SimpleNamespace(_queue=queue))
    assert stream_session(scope("/gradio_api/heartbeat/abc")) == "abc"
    assert stream_session(scope("/gradio_api/queue/data", b"session_hash=xyz")) == "xyz"
    assert stream_session(scope("/gradio_api/call/decode/e1", app=app)) == "s1"
    assert stream_session(scope("/gradio_api/call/v2/decode/e2", app=app)) == "s2"
    assert stream_session(scope("/gradio_api/call/decode/e3", app=app)) == "e3"     # the event is its session
    assert stream_session(scope("/gradio_api/call/decode", method="POST")) is None
    assert stream_session(scope("/gradio_api/queue/join", method="POST")) is None
    assert stream_session(scope("/")) is None


def test_the_middleware_counts_a_stream_until_its_response_ends():
    streams = installed()
    seen = []

    async def app(scope, receive, send):
        seen.append(dict(streams.open))
        await asyncio.sleep(0.01)

    async def scenario():
        mw = Presence(app, streams)
        await mw(scope("/gradio_api/heartbeat/s"), None, None)
        await mw(scope("/gradio_api/upload", method="POST"), None, None)
        return streams
    asyncio.run(scenario())
    assert seen == [{"s": 1}, {}] and not streams.open and "s" in streams.closed_at


def test_follow_stops_the_work_of_a_gone_client_at_its_next_forward_and_draws_nothing_more():
    """The worker's ``should_stop`` turns true as soon as the client is gone; ``follow`` waits for the worker to
    stop and raises ``Gone`` instead of yielding its last value."""
    streams = installed()
    streams.opened("s")
    forwards, stopped = [], threading.Event()

    def produce(should_stop):
        try:
            while not should_stop():
                forwards.append(time.monotonic())
                time.sleep(0.005)
                yield len(forwards)
        finally:                                  # ended by should_stop, or closed by the worker
            stopped.set()

    async def scenario():
        presence.watch(streams, "s")
        got = []
        with pytest.raises(Gone):
            async for f in follow(produce, None, interval=0.02):
                got.append(f.value)
                if len(got) == 3:
                    streams.closed("s")
                    closed_at = time.monotonic()
        return got, closed_at
    got, closed_at = asyncio.run(scenario())
    assert stopped.is_set() and len(got) == 3
    assert sum(f > closed_at for f in forwards) <= 1     # no forward after the one in flight (if any)


@pytest.mark.parametrize("header, client", [
    ([b"203.0.113.7"], "203.0.113.7"),                                  # the platform's proxy appended it
    ([b"6.6.6.6, 203.0.113.7"], "203.0.113.7"),                         # a forged entry prepended: ignored
    ([b"6.6.6.6, 1.1.1.1, 203.0.113.7, 10.0.0.4"], "203.0.113.7"),      # the platform's own hop skipped
    ([b"6.6.6.6", b"203.0.113.7"], "203.0.113.7"),                      # two headers: one list, in order
    ([b"evil, 203.0.113.7"], "203.0.113.7"),
    ([b"203.0.113.7, evil"], "10.0.0.2"),                               # not an address: the peer counts
    ([b"10.1.1.1, 127.0.0.1"], "10.0.0.2"),                             # only hops: the peer
    ([b"[2001:db8::1]:443"], "2001:db8::1"),
    ([b"203.0.113.7:5555"], "203.0.113.7"),
    ([b"x" * 200 + b", 203.0.113.7"], "203.0.113.7"),
])
def test_a_spaces_client_is_the_right_most_address_that_is_not_a_platform_hop(header, client):
    assert forwarded_client("10.0.0.2", header) == client


def test_on_a_space_forged_headers_change_nothing():
    """Through the middleware: a visitor who prepends any addresses is still counted as the address the platform's
    proxy appended; without the header the peer counts."""
    seen = []

    async def app(scope, receive, send):
        seen.append(scope["client"][0])

    async def call(xff):
        headers = [(b"x-forwarded-for", xff)] if xff is not None else []
        await SpaceClient(app)(dict(type="http", headers=headers, client=("10.0.0.2", 4000)), None, None)

    async def scenario():
        for forged in (b"", b"1.2.3.4, ", b"9.9.9.9, 8.8.8.8, 127.0.0.1, ", b"10.0.0.5, garbage, "):
            await call(forged + b"198.51.100.23")
        await call(None)
    asyncio.run(scenario())
    assert seen == ["198.51.100.23"] * 4 + ["10.0.0.2"]


def test_an_ipv6_client_counts_as_its_slash_48_and_a_mapped_ipv4_as_itself():
    # a subscriber's /56 holds 256 /64s: counted by /64 they would be 256 clients of the fair queue
    assert client_key("2001:db8:1:2::5") == client_key("2001:db8:1:ff00::9") == "2001:db8:1::/48"
    assert client_key("2001:db8:2::5") != client_key("2001:db8:1:2::5")
    assert client_key("192.0.2.1") == "192.0.2.1" and client_key(None) == ""
    assert client_key("::ffff:192.0.2.1") == "192.0.2.1" != client_key("::ffff:192.0.2.2")
    assert forwarded_client("10.0.0.2", [b"198.51.100.7, ::ffff:10.0.0.1"]) == "198.51.100.7"   # a private hop


def test_the_forwarded_for_walk_is_bounded_in_entries_and_bytes():
    import time
    hops = b", ".join([b"10.0.0.1"] * 6000)                     # 60 KB of private hops
    assert forwarded_client("10.0.0.2", [b"198.51.100.7, " + hops]) == "10.0.0.2"
    assert forwarded_client("10.0.0.2", [b"198.51.100.7, " + b", ".join([b"10.0.0.1"] * 20)]) == "10.0.0.2"
    assert forwarded_client("10.0.0.2", [b"198.51.100.7, 10.0.0.1, 10.0.0.3"]) == "198.51.100.7"
    t0 = time.process_time()
    for _ in range(100):
        forwarded_client("10.0.0.2", [hops])
    assert time.process_time() - t0 < 1.0      # bounded work (before: about 22 ms a call, 2.2 s for these)


def test_off_a_space_the_app_adds_no_header_rule_and_on_a_space_it_does(monkeypatch):
    from explorer.layout import middleware
    from explorer.page.assets_cache import AssetCache
    from explorer.page.frame_guard import FrameGuard
    monkeypatch.delenv("UNMASK_TRUSTED_PROXIES", raising=False)
    monkeypatch.delenv("SPACE_ID", raising=False)
    assert [m.cls for m in middleware()] == [BodyLimit, Presence, AssetCache, FrameGuard]
    monkeypatch.setenv("SPACE_ID", "someone/unmask")
    assert [m.cls for m in middleware()] == [BodyLimit, Presence, AssetCache, FrameGuard, SpaceClient]
