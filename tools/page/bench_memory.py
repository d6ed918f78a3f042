"""Memory of the served app under a hostile client: RSS of the real app (``python app.py`` on a loopback port) while
one client opens new sessions with one cheap call each, and while one session repeats the page's Run.

    python -m tools.page.bench_memory                          # 600 sessions, 300 Runs (a few minutes)
    python -m tools.page.bench_memory --sessions 200 --runs 0
    python -m tools.page.bench_memory --sessions 0 --runs 0 --crafted 62     # nested JSON in a check box
    python -m tools.page.bench_memory --sessions 0 --runs 64 --parallel 16 --idle 30   # memory given back?
    python -m tools.page.bench_memory --decodes 64 --parallel 16      # in this process, around malloc_trim
    python -m tools.page.bench_memory --sessions 200 --runs 64 --parallel 16 --crafted 20 --page-runs 40 --idle 600

``--crafted N``: N new sessions each send the page's Run with a ~0.9 MB nested list (``[[[...]]]`` pieces, under the
body limit) as the value of a check box, four at a time, while a bystander GETs ``robots.txt`` every 0.2 s: RSS
before and after, and the bystander's times, beside its times over 3 s before (issue 65: gradio kept such a value in
the session before refusing it, and parsed and walked it on the server's event loop).

``--parallel K``: the Runs come from K sessions at once (K decodes in the engine together, K handler threads).
``--page-runs N``: also N page Runs at once, each from its own /24 (``tools.page.bench_flood``'s class of 40), after
the other calls.
``--idle S``: the app serves with ``UNMASK_SESSION_IDLE_S=S``; after the calls, RSS is read again once every
session has been idle that long and the sweeper has passed (issue 74: RSS back within 100 MiB of its start).

Calls go over raw HTTP, as a script without a browser (and without a heartbeat) would make them: gradio's queue
``join`` then its event stream. Prints a Markdown table: RSS at points, and the growth over the last half; with
``--idle``, RSS at start, at its peak (sampled every 0.2 s) and after the idle time.
"""

from __future__ import annotations

import argparse
import json
import time
import urllib.request
import uuid

from tools.bench.app import add_app_dir, served


def rss_mib(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def call(url: str, fn: int, data: list, session: str, timeout_s: float = 120, total_s: float | None = None,
         raw: bytes | None = None) -> dict:
    """One event of the page, as gradio's own client sends it; its completion message (``timeout_s``: how long
    its event stream may stay silent; ``total_s``: how long it may last, heartbeats or not, checked at each of its
    lines: gradio sends a heartbeat every 15 s, so a stream that waits may never be silent for long). ``raw``: the
    body, already made, with ``SESSION`` where the session goes (a large body is not encoded again each call)."""
    body = raw.replace(b"SESSION", session.encode()) if raw is not None else json.dumps(
        {"data": data, "fn_index": fn, "session_hash": session, "event_data": None, "trigger_id": None}).encode()
    req = urllib.request.Request(url + "gradio_api/queue/join", body, {"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=timeout_s).read()
    t0 = time.monotonic()
    with urllib.request.urlopen(url + f"gradio_api/queue/data?session_hash={session}", timeout=timeout_s) as r:
        for line in r:
            if b"process_completed" in line:
                return json.loads(line[5:])
            if total_s is not None and time.monotonic() - t0 > total_s:
                raise RuntimeError(f"no result within {total_s:g} s")
    raise RuntimeError("the event stream ended without a result")


def event(cfg: dict, api_name: str) -> tuple[int, list]:
    """A page event's index and the page's initial values of its inputs (a gr.State is held by the server)."""
    dep = next(d for d in cfg["dependencies"] if d.get("api_name") == api_name)
    comps = {c["id"]: c for c in cfg["components"]}
    return dep["id"], [None if comps[i]["type"] == "state" else comps[i].get("props", {}).get("value")
                       for i in dep["inputs"]]


def measure(url: str, pid: int, n: int, fn: int, data: list, one_session: bool, parallel: int = 1) -> list[float]:
    """RSS after each call of `n` (each from a new session, or all from one session per parallel caller)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor
    caller = threading.local()               # one session per caller: a session's event stream serves one call

    def one(_) -> float:
        if not one_session or not hasattr(caller, "session"):
            caller.session = uuid.uuid4().hex[:11]
        done = call(url, fn, data, caller.session)
        if not done.get("success"):
            raise RuntimeError(f"the call failed: {str(done)[:200]}")
        return rss_mib(pid)
    with ThreadPoolExecutor(parallel) as pool:
        return list(pool.map(one, range(n)))


class Peak:
    """The highest RSS of a process, sampled every 0.2 s on a thread while in the ``with`` block."""

    def __init__(self, pid: int):
        import threading
        self.pid, self.value, self._done = pid, rss_mib(pid), threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._done.wait(0.2):
            self.value = max(self.value, rss_mib(self.pid))

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join()
        self.value = max(self.value, rss_mib(self.pid))


def after_idle(pid: int, idle_s: float) -> list[float]:
    """RSS each second while every session goes idle and the sweeper passes (idle_s + 2 sweeps + 5 s)."""
    out = []
    for _ in range(int(idle_s + 2 * min(5.0, idle_s / 2) + 5)):
        time.sleep(1)
        out.append(rss_mib(pid))
    return out


def nested(size: int = 900_000, depth: int = 50) -> list:
    """A list of ``[[[...]]]`` pieces ``depth`` deep, about ``size`` bytes as JSON."""
    piece = []
    for _ in range(depth):
        piece = [piece]
    return [piece] * (size // (2 * depth + 2))


def crafted(url: str, pid: int, n: int, fn: int, data: list, checkbox: int) -> dict:
    """RSS before and after ``n`` crafted Runs (four at a time), and a bystander's page loads meanwhile (s)."""
    import threading
    from concurrent.futures import ThreadPoolExecutor
    data = list(data)
    data[checkbox] = nested()
    raw = json.dumps({"data": data, "fn_index": fn, "session_hash": "SESSION", "event_data": None,
                      "trigger_id": None}).encode()
    loads, done = [], threading.Event()

    def bystander():
        while not done.is_set():
            t0 = time.perf_counter()
            try:
                urllib.request.urlopen(url + "robots.txt", timeout=60).read()
            except OSError:                               # counted at its full wait: the server did not answer
                pass
            loads.append(time.perf_counter() - t0)
            time.sleep(0.2)
    before = rss_mib(pid)
    watcher = threading.Thread(target=bystander)
    watcher.start()
    time.sleep(3)
    quiet, loads[:] = list(loads), []
    def one(_):
        try:
            return call(url, fn, data, uuid.uuid4().hex[:11], total_s=120, raw=raw)
        except (OSError, RuntimeError) as e:              # no answer: the server is swamped (before)
            return {"success": False, "lost": str(e)[:80]}
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(one, range(n)))
    done.set()
    watcher.join()
    return {"before": before, "after": rss_mib(pid), "loads": loads, "quiet": quiet,
            "refused": sum(not a.get("success") for a in answers)}


def in_process(decodes: int, parallel: int) -> str:
    """RSS of this process around ``decodes`` decodes (threshold, 128 tokens, the embedded model) from ``parallel``
    threads through the service, as the server's handlers run them: at start, after them, after the trim."""
    import gc
    import os
    import threading
    from engine.harness.service import DecodeService
    from explorer.page.sessions import give_back_memory
    service = DecodeService(threads=1)
    service.run("1+2=", "threshold", {"gen_length": 32})            # first-call allocations before the start
    start, todo = rss_mib(os.getpid()), iter(range(decodes))

    def caller():
        for i in todo:
            service.run(f"{i}+{i % 7}=", "threshold", {"gen_length": 128, "block_size": 8, "tau": 0.9})
    threads = [threading.Thread(target=caller) for _ in range(parallel)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    gc.collect()
    after = rss_mib(os.getpid())
    trimmed = give_back_memory()
    return (f"{decodes} decodes, {parallel} threads, in one process: RSS {start:.0f} MiB at start, {after:.0f} after "
            f"them, {rss_mib(os.getpid()):.0f} after malloc_trim ({'ran' if trimmed else 'not glibc: not run'})")


def growth(series: list[float]) -> float:
    """RSS growth over the last half of the calls."""
    return series[-1] - series[len(series) // 2 - 1]


def run(sessions: int, runs: int, n_crafted: int = 0, parallel: int = 1, idle_s: float = 0.0, app_dir: str = "",
        page_runs: int = 0, **env) -> dict:
    if idle_s:
        env["UNMASK_SESSION_IDLE_S"] = str(idle_s)
    with served(app_dir, start_s=600, **env) as app:
        url, pid = app.url, app.pid
        cfg = json.load(urllib.request.urlopen(url + "config"))
        out = {"start": rss_mib(pid)}
        with Peak(pid) as peak:
            if n_crafted:
                fn, data = event(cfg, "on_run")
                types = {c["id"]: c["type"] for c in cfg["components"]}
                dep = next(d for d in cfg["dependencies"] if d["id"] == fn)
                box = next(i for i, c in enumerate(dep["inputs"]) if types[c] == "checkbox")
                out["crafted"] = crafted(url, pid, n_crafted, fn, data, box)
            if sessions:
                out["sessions"] = measure(url, pid, sessions, *event(cfg, "partial"), one_session=False,
                                          parallel=parallel)
            if runs:
                out["runs"] = measure(url, pid, runs, *event(cfg, "on_run"), one_session=True,
                                      parallel=parallel)
            if page_runs:
                from tools.page.bench_flood import page_runs as class_of
                out["page_runs"] = dict(class_of(url, page_runs), n=page_runs, rss=rss_mib(pid))
        out["peak"] = peak.value
        if idle_s:
            out["idle"] = after_idle(pid, idle_s)
        return out


def gets(times: list[float]) -> str:
    """A bystander's GETs: median and worst (none: the calls ended before its first GET did)."""
    t = sorted(times)
    return f"median {t[len(t) // 2] * 1000:.0f} ms, worst {t[-1] * 1000:.0f} ms" if t else "none ended"


def crafted_row(c: dict, what: str) -> str:
    return (f"| {what} | {c['refused']} refused | {c['before']:.0f} → {c['after']:.0f} | "
            f"{c['after'] - c['before']:+.1f} MiB; a bystander's GET {gets(c['loads'])} ({len(c['loads'])} GETs; "
            f"before the calls: {gets(c['quiet'])}) |")


def table(res: dict) -> str:
    rows = ["| load | calls | RSS at start → half → end (MiB) | growth over the last half |", "|---|---|---|---|"]
    for key, what in (("sessions", "new sessions, one cheap call each"), ("runs", "one session, the page's Run")):
        s = res.get(key)
        if s:
            rows.append(f"| {what} | {len(s)} | {s[0]:.0f} → {s[len(s) // 2 - 1]:.0f} → {s[-1]:.0f} | "
                        f"{growth(s):+.1f} MiB |")
    if res.get("crafted"):
        rows.append(crafted_row(res["crafted"], "crafted Runs (nested JSON in a check box), four at a time"))
    c = res.get("page_runs")
    if c:
        rows.append(f"| {c['n']} page Runs at once, one /24 each | last answer {c['last_s']:.1f} s, {c['cut']} cut, "
                    f"{c['refused']} refused | RSS after them {c['rss']:.0f} | bystander's slowest GET "
                    f"{c['worst_get_s'] * 1000:.0f} ms |")
    if res.get("idle"):
        rows.append(f"| every session idle past UNMASK_SESSION_IDLE_S | RSS at start → peak → after idle | "
                    f"{res['start']:.0f} → {res['peak']:.0f} → {res['idle'][-1]:.0f} | "
                    f"{res['idle'][-1] - res['start']:+.1f} MiB against the start |")
    return "\n".join(rows)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=600)
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--crafted", type=int, default=0, help="Runs from new sessions with nested JSON in a check box")
    ap.add_argument("--parallel", type=int, default=1, help="sessions calling at once")
    ap.add_argument("--page-runs", type=int, default=0, help="page Runs at once, one /24 each (bench_flood's)")
    ap.add_argument("--idle", type=float, default=0.0, help="UNMASK_SESSION_IDLE_S; then RSS after that idle time")
    ap.add_argument("--decodes", type=int, default=0, help="instead of the app: this many decodes in this process "
                    "from --parallel threads, RSS before and after malloc_trim")
    add_app_dir(ap)
    args = ap.parse_args(argv)
    if args.decodes:
        print(in_process(args.decodes, args.parallel))
        return
    space = {"SPACE_ID": "someone/unmask"} if args.crafted else {}          # as a Space serves it
    res = run(args.sessions, args.runs, args.crafted, args.parallel, args.idle, args.app_dir, args.page_runs, **space)
    print(json.dumps(res))             # the figures whatever the table makes of them (a long run is not lost)
    print(table(res))


if __name__ == "__main__":
    main()
