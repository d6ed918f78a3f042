"""A gone client's work stops: the server's CPU in the seconds after a visitor leaves a heavy request, on every path.

    python -m tools.page.bench_abandon                  # every path (about two minutes on two cores)
    python -m tools.page.bench_abandon --paths decode decode-unopened --json out.json

Starts ``python app.py`` on a loopback port (budget ``UNMASK_MAX_SECONDS`` 60 s, so work left running would keep
the server busy for most of a minute). Each path starts work that needs far longer than the window (AR over 1024
slots without a cache, ~9 s of forwards; a 48-setting sweep), over raw HTTP as gradio's own clients send it, waits until the server
is busy, then leaves: it closes the event stream (and the page's heartbeat, as a closed tab does), or never opens
one. Prints, per path, the server's CPU-seconds in the first second after leaving, in the two seconds after that,
and in the whole six-second window, and until when a quarter-second sample still used over half a core (a decode
left running uses one).

Paths: ``decode`` / ``decode-unopened`` (the documented API over ``/call/decode``, its stream closed / never
opened), ``branch`` / ``branch-unopened`` (the API with a branch), ``compare``, ``sweep`` (their ``/call/``
routes), ``run`` (the page's Run over gradio's queue, the tab closed), ``page-branch`` (a page's Branch here),
``gif`` (the page's GIF of a long run).
"""

from __future__ import annotations

import argparse
import socket
import time
import uuid

import httpx

from tools.bench.app import add_app_dir, served
from tools.page.bench_memory import call, event
from tools import provenance

PROMPT = "Ann has 3 apples. She buys 5 more. How many apples does she have now?"
HEAVY = "ar:gen_length=256,stop_at_eos=0,use_cache=0"            # ~9 s of forwards on this model, one thread
MODEL = "unmask-tasks-small"
BUSY_CORE = 0.5                                                   # "busy": over half a core (a decode takes one)


def cpu_seconds(pid: int) -> float:
    import os
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def busy(pid: int, what: str, timeout_s: float = 30.0) -> None:
    """Wait until the server uses most of a core for a second (the work has started)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        before = cpu_seconds(pid)
        time.sleep(1.0)
        if cpu_seconds(pid) - before > BUSY_CORE:
            return
    raise RuntimeError(f"{what}: the server never got busy")


def after(pid: int, window_s: float = 6.0, every_s: float = 0.25) -> dict:
    """CPU-seconds in [0, 1] and [1, 3] s after now, and when the CPU was idle from (idle for good in the window)."""
    t0, c0 = time.monotonic(), cpu_seconds(pid)
    samples = []
    while time.monotonic() - t0 < window_s:
        time.sleep(every_s)
        samples.append((time.monotonic() - t0, cpu_seconds(pid) - c0))

    def at(t):
        return next(c for s, c in samples if s >= t - 1e-3)
    rates = [(s, (c - pc) / (s - ps)) for (ps, pc), (s, c) in zip([(0.0, 0.0)] + samples, samples)]
    busy_until = max((s for s, r in rates if r > BUSY_CORE), default=0.0)
    return dict(first_s=round(at(1.0), 2), next2_s=round(at(3.0) - at(1.0), 2), busy_until_s=round(busy_until, 2),
                window_s=round(samples[-1][1], 2))


class Visitor:
    """One browser tab or script over raw HTTP: a session, optionally the page's heartbeat, events on the queue."""

    def __init__(self, url: str, heartbeat: bool = True):
        self.url, self.session = url, uuid.uuid4().hex[:11]
        self.http = httpx.Client(base_url=url, timeout=60)
        self.streams: list = []
        if heartbeat:
            self.open(f"gradio_api/heartbeat/{self.session}")

    def open(self, path: str) -> None:
        """An event stream, held open (a plain socket: closing it closes the connection at once, as a closed tab
        does; the server's messages wait in the socket's buffers, unread)."""
        host, port = httpx.URL(self.url).host, httpx.URL(self.url).port
        sock = socket.create_connection((host, port), timeout=10)
        sock.sendall(f"GET /{path} HTTP/1.1\r\nHost: {host}\r\nAccept: text/event-stream\r\n\r\n".encode())
        if not sock.recv(256).startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"the stream {path} was refused")
        self.streams.append(sock)

    def join(self, fn: int, data: list) -> None:
        self.http.post("gradio_api/queue/join", json={"data": data, "fn_index": fn, "session_hash": self.session,
                                                       "event_data": None, "trigger_id": None}).raise_for_status()
        self.open(f"gradio_api/queue/data?session_hash={self.session}")

    def call(self, api: str, data: list, opened: bool = True) -> None:
        event_id = self.http.post(f"gradio_api/call/{api}", json={"data": data}).json()["event_id"]
        if opened:
            self.open(f"gradio_api/call/{api}/{event_id}")

    def leave(self) -> None:
        for sock in self.streams:
            sock.close()
        self.http.close()


def page_inputs(cfg: dict, api: str, **by_elem) -> tuple[int, list]:
    """A page event's index and its inputs: the page's initial values, those named by elem_id replaced."""
    fn, data = event(cfg, api)
    comps = {c["id"]: c for c in cfg["components"]}
    dep = next(d for d in cfg["dependencies"] if d.get("api_name") == api)
    ids = [comps[i].get("props", {}).get("elem_id") for i in dep["inputs"]]
    return fn, [by_elem.get(e, v) if e else v for e, v in zip(ids, data)]


def start(path: str, url: str, cfg: dict) -> Visitor:
    """Start the path's heavy work as a visitor would; returns the visitor (``leave()`` to go)."""
    if path in ("decode", "decode-unopened", "branch", "branch-unopened"):
        v = Visitor(url, heartbeat=False)
        branch = '{"step": 0, "spec": "ar"}' if path.startswith("branch") else ""     # the base run, then AR
        v.call("decode", [PROMPT, HEAVY, "", branch], opened=not path.endswith("unopened"))
        return v
    if path == "compare":
        v = Visitor(url, heartbeat=False)
        v.call("compare", [PROMPT, MODEL, HEAVY, HEAVY.replace("ar:", "ar:seed=1,")])
        return v
    if path == "sweep":
        v = Visitor(url, heartbeat=False)
        v.call("sweep", ["unmask-arith-tiny", "threshold", "0.5,0.6,0.7,0.8,0.9,0.95", "4,8,16,32", "seed=0,seed=1",
                         "arith", 200, 0.0])
        return v
    v = Visitor(url)
    if path == "run":
        v.join(*page_inputs(cfg, "on_run", prompt=PROMPT, decoder="ar", gen_length=256, use_cache=False,
                            stop_at_eos=False))
        return v
    # a finished run in this session first (its trace is the session's state), then the path's work on it
    base = dict(prompt=PROMPT, decoder="llada", gen_length=256, block_size=32, steps=1, stop_at_eos=False) \
        if path == "page-branch" else dict(prompt=PROMPT, decoder="ar", gen_length=200, stop_at_eos=False)
    done = call(url, *page_inputs(cfg, "on_run", **base), v.session)
    if not done.get("success"):
        raise RuntimeError(f"the base run failed: {str(done)[:300]}")
    if path == "page-branch":             # Branch here at step 0 (the scrubber's step), then the branch under AR
        branch_inputs = next(d for d in cfg["dependencies"] if d.get("api_name") == "on_branch")["inputs"]
        here = next(d for d in cfg["dependencies"] if d.get("js") and len(d["inputs"]) == 4
                    and branch_inputs[1] in d["outputs"])      # the event that fills the branch's point
        done = call(url, here["id"], [None, None, 0, -1], v.session)
        if not done.get("success"):
            raise RuntimeError(f"Branch here failed: {str(done)[:300]}")
        v.join(*page_inputs(cfg, "on_branch", **{"branch-spec": "ar:use_cache=0,stop_at_eos=0"}))
    else:
        v.join(*page_inputs(cfg, "on_gif"))
    return v


def measure(url: str, pid: int, paths: list[str]) -> list[dict]:
    cfg = httpx.get(url + "config", timeout=30).json()
    rows = []
    for path in paths:
        v = start(path, url, cfg)
        busy(pid, path)
        v.leave()
        rows.append(dict(path=path, **after(pid)))
        print(rows[-1], flush=True)
        time.sleep(0.5)
    return rows


PATHS = ("decode", "decode-unopened", "branch", "branch-unopened", "compare", "sweep", "run", "page-branch", "gif")


def table(rows: list[dict]) -> str:
    head = ("| path (the visitor leaves a heavy request) | CPU-s in the first second | in the next two | in six "
            "| busy until (s) |\n|---|---|---|---|---|")
    return "\n".join([head] + [f"| {r['path']} | {r['first_s']:.2f} | {r['next2_s']:.2f} | {r['window_s']:.2f} | "
                               f"{r['busy_until_s']:.2f} |" for r in rows])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--paths", nargs="+", choices=PATHS, default=list(PATHS))
    ap.add_argument("--json", default="")
    add_app_dir(ap)
    args = ap.parse_args(argv)
    with served(args.app_dir, UNMASK_MAX_SECONDS="60") as app:
        rows = measure(app.url, app.pid, args.paths)
    print(table(rows))
    if args.json:
        provenance.write(args.json, rows, argv)


if __name__ == "__main__":
    main()
