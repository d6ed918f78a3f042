"""A class at once: N visitors from one address call the real app's documented ``decode`` API at the same moment.

    python -m tools.page.bench_visitors                     # N = 1, 4, 12, 32 (a few minutes on two cores)
    python -m tools.page.bench_visitors --n 1 12 --spec "threshold:tau=0.9,block_size=8" --json out.json
    python -m tools.page.bench_visitors --client gradio --flood 0 --second 0     # through gradio_client

Starts ``python app.py`` on a loopback port with the app's default settings (every visitor here is one client,
127.0.0.1, as a class behind a school's address). Each prompt alone first, three times (the solo answer and the
median time); then, per N, N visitors (distinct held-out prompts; plain HTTP on ``/call/decode`` or
``gradio_client``) at once, with (``--flood``) one session of that address sending 30 calls and (``--second``) one
visitor from 127.0.0.2. Per N: refusals, the makespan against one alone, answer p50 / p95, the flood's and the
second address's fate, tokens/s, RSS, whether every answer equals its solo one (text, ids, NFE) and how the
forwards ran (``forward_path``; for differing answers, theirs against solo, both NFE and the first token that
differs). ``--static on``: the server's static path, eager where nothing compiles. ``--page N``: N real page Runs
in Chromium; ``--full N``: N heavy decodes past the queue's bound (the refusals and the RSS).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from collections import Counter
from pathlib import Path

from tools.bench import app as bench_app
from tools.bench.browser import chromium
from tools.bench.visitors import Gate, wave as wave_of
from tools.page.bench_abandon import HEAVY
from tools.page.bench_memory import rss_mib
from tools import provenance

KEYS = ("text", "token_ids", "nfe")


def prompts(n: int) -> list[str]:
    """n distinct held-out prompts of the page's default model (its tasks' test split)."""
    from engine.tasks import get_task
    out, seen = [], set()
    for p in get_task("mix").problems("test", 4 * n, seed=7):
        if p.typed not in seen:
            seen.add(p.typed)
            out.append(p.typed)
    return out[:n]


OPEN = {"on": False}   # --open-sessions: each visitor's session exists before the clock (as a page visitor's does)
CLIENT = {"kind": "http"}   # --client: plain HTTP (gradio's documented /call/ route), or gradio_client


def visit(url: str, prompt: str, spec: str, gate: Gate, out: dict) -> None:
    """One visitor: connect, wait at the gate, submit, note the first streamed frame and the answer (seconds from
    the gate's opening); with ``out["flood"]`` one session sending that many calls (``flood_http``)."""
    if out.get("flood"):
        return flood_http(url, prompt, spec, gate, out)
    (visit_http if CLIENT["kind"] == "http" else visit_gradio)(url, prompt, spec, gate, out)


def flood_http(url: str, prompt: str, spec: str, gate: Gate, out: dict) -> None:
    """One session sends ``out["flood"]`` decode calls at once over gradio's queue (``/queue/join``, as its own
    clients do) and reads their results on the session's one event stream: ``out["results"]``, each the answer
    or the refusal; ``answer_s`` when the last ended."""
    import httpx
    client = httpx.Client(base_url=url, timeout=120)
    deps = client.get("config").json()["dependencies"]
    fn = next(d["id"] for d in deps if d.get("api_name") == "decode")
    session = uuid.uuid4().hex[:11]
    gate.wait()
    for _ in range(out["flood"]):
        client.post("gradio_api/queue/join", json={"data": [prompt, spec, "", ""], "fn_index": fn,
                                                   "session_hash": session, "event_data": None, "trigger_id": None})
    results = []
    with client.stream("GET", f"gradio_api/queue/data?session_hash={session}") as stream:
        for line in stream.iter_lines():
            msg = json.loads(line[6:]) if line.startswith("data: ") else {}
            if msg.get("msg") == "process_completed":
                ok = msg.get("success")
                results.append({"answer": msg["output"]["data"][0]} if ok else {"refused": str(msg["output"])})
                if len(results) == out["flood"]:
                    break
    client.close()
    out.update(results=results, answer_s=gate.since())


def visit_gradio(url: str, prompt: str, spec: str, gate: Gate, out: dict) -> None:
    from gradio_client import Client
    # a visitor's own machine pays its client's costs: without ssl_verify=False gradio_client loads the CA bundle
    # for each of its HTTP requests (~40 ms of CPU, on loopback HTTP where no certificate is ever checked), which
    # twelve clients in this one process would pay on the server's two cores inside the measured window
    client = Client(url, verbose=False, ssl_verify=False)
    if OPEN["on"]:             # an eight-token decode: gradio makes the session's state (every component's config)
        client.predict(prompt, "ar:gen_length=8", api_name="/decode")
    gate.wait()
    first, last = None, None
    for value in client.submit(prompt, spec, api_name="/decode"):
        first = first if first is not None else gate.since()
        last = value
    out.update(first_s=first, answer_s=gate.since(), answer=last)


def visit_http(url: str, prompt: str, spec: str, gate: Gate, out: dict) -> None:
    """The same call over gradio's plain HTTP route (POST /gradio_api/call/decode, then its event stream): no
    client-side polling (gradio_client reads its stream's messages every 50 ms, which quantizes a short call's
    time); each call is a new session, as a new visitor's, unless ``out["session"]`` names one (a flooding
    session's calls); ``out["source"]`` is the local address it connects from (another client: 127.0.0.2). A
    refusal is kept as ``out["refused"]``."""
    import httpx
    source = out.get("source")
    client = httpx.Client(base_url=url, timeout=120,
                          transport=httpx.HTTPTransport(local_address=source) if source else None)
    gate.wait()
    body = {"data": [prompt, spec, "", ""], **({"session_hash": out["session"]} if out.get("session") else {})}
    event_id = client.post("gradio_api/call/decode", json=body).json()["event_id"]
    first, last, event = None, None, None
    with client.stream("GET", f"gradio_api/call/decode/{event_id}") as stream:
        for line in stream.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event in ("generating", "complete"):
                first = first if first is not None else gate.since()
                last = json.loads(line[6:])[0]
                if event == "complete":
                    break
            elif line.startswith("data: ") and event == "error":
                out["refused"] = line[6:300]
                break
    client.close()
    out.update(first_s=first, answer_s=gate.since(), answer=last)


def wave(url: str, batch: list[str], spec: str, extra: list[dict] | None = None) -> list[dict]:
    """Every prompt of ``batch`` as its own visitor, all submitted at the same moment (``extra``: the options of
    each, ``visit_http``'s session and source)."""
    outs = [dict(e) for e in (extra or [{} for _ in batch])]
    wave_of([lambda gate, p=p, o=o: visit(url, p, spec, gate, o) for p, o in zip(batch, outs)])
    return outs


def paths(answers: list[dict]) -> dict:
    """The answers' forwards by how they ran (the API's ``forward_path``: eager, static, compiled, graph)."""
    return dict(sum((Counter(o["answer"].get("forward_path") or {}) for o in answers), Counter()))


def first_difference(a: list, b: list) -> int:
    """The first position where two answers' tokens differ: late and alike is a near tie flipped by the last float
    bits, from the first tokens on is a decode that read another's state."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def measure(url: str, pid: int, ns: list[int], spec: str, flood: int = 0, second: bool = False) -> list[dict]:
    """Per N: N visitors at once (and, with ``flood``, one session of their address sending that many calls at the
    same moment; with ``second``, one visitor from another address, 127.0.0.2), against each prompt alone."""
    pool = prompts(max(ns) + 2)
    solo = {}
    wave(url, pool[:1], spec)                        # warm-up: the server's first call pays its first-call costs
    for p in pool:       # each alone, three times: the first answer is the reference, the median time the solo time
        runs = [wave(url, [p], spec)[0] for _ in range(3)]
        solo[p] = dict(runs[0], answer_s=statistics.median(o["answer_s"] for o in runs))
    rows = []
    for n in ns:
        batch, flooder, other = pool[:n], pool[max(ns)], pool[max(ns) + 1]
        extra = [{} for _ in batch] + ([{"flood": flood}] if flood else []) + ([{"source": "127.0.0.2"}] if second else [])
        outs = wave(url, batch + [flooder] * bool(flood) + ([other] if second else []), spec, extra)
        cls, sec = outs[:n], outs[n + bool(flood):]
        fl = outs[n]["results"] if flood else []
        served = [o for o in cls if "refused" not in o]
        makespan = max(o["answer_s"] for o in served)
        solo_s = statistics.mean(solo[p]["answer_s"] for p in batch)     # one of these visitors alone, on average
        same = all("refused" not in o and {k: o["answer"][k] for k in KEYS} == {k: solo[p]["answer"][k] for k in KEYS}
                   for p, o in zip(batch + [flooder] * flood + [other], cls + fl + sec) if "refused" not in o)
        tokens = sum(len(o["answer"]["token_ids"]) for o in served)
        row = dict(n=n, makespan_s=round(makespan, 3), solo_s=round(solo_s, 3),
                   makespan_x=round(makespan / solo_s, 2), serial_x=float(n), refused=n - len(served),
                   first_p50=round(pct([o["first_s"] for o in served], 0.5), 3),
                   first_p95=round(pct([o["first_s"] for o in served], 0.95), 3),
                   answer_p50=round(pct([o["answer_s"] for o in served], 0.5), 3),
                   answer_p95=round(pct([o["answer_s"] for o in served], 0.95), 3),
                   tokens_per_s=round(tokens / makespan, 1), rss_mib=round(rss_mib(pid), 1), identical=same)
        differ = [(p, o) for p, o in zip(batch, cls) if "refused" not in o and any(     # and how those ran
            o["answer"][k] != solo[p]["answer"][k] for k in KEYS)]
        row.update(forward_paths=paths(served), solo_forward_paths=paths([solo[p] for p in batch]),
                   differing=[dict(class_path=paths([o]), solo_path=paths([solo[p]]),
                                   nfe=[o["answer"]["nfe"], solo[p]["answer"]["nfe"]],
                                   first_token=first_difference(o["answer"]["token_ids"],
                                                                solo[p]["answer"]["token_ids"]))
                              for p, o in differ])
        if flood:
            row.update(flood=flood, flood_served=sum("refused" not in o for o in fl),
                       flood_last_s=round(outs[n]["answer_s"], 3))
        if sec:
            row.update(second_s=round(sec[0]["answer_s"], 3), second_solo_s=round(solo[other]["answer_s"], 3),
                       second_refused="refused" in sec[0])
        rows.append(row)
    return rows


def measure_full(url: str, pid: int, n: int) -> dict:
    """A queue filled past its bound: n heavy decodes from n sessions of one address at once, each reading its
    stream until the server answers; RSS before and with the queue full, how many were refused and how, then every
    client leaves (its work stops: ``explorer.page.presence``)."""
    import socket

    import httpx
    before = rss_mib(pid)
    client = httpx.Client(base_url=url, timeout=60)
    socks, turned_away = [], 0
    for _ in range(n):
        r = client.post("gradio_api/call/decode", json={"data": ["Ann has 3 apples.", HEAVY, "", ""]})
        if r.status_code != 200:                      # gradio's own queue (UNMASK_QUEUE) refused the call
            turned_away += 1
            continue
        s = socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1].strip("/"))))
        s.sendall(f"GET /gradio_api/call/decode/{r.json()['event_id']} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        socks.append(s)
    time.sleep(3.0)
    full = rss_mib(pid)
    texts = []
    for s in socks:
        s.settimeout(0.05)
        got = b""
        try:
            while chunk := s.recv(65536):          # headers, then whatever the server has sent (a refusal)
                got += chunk
        except OSError:                            # nothing more for now
            pass
        texts.append(got.decode("latin1"))
        s.close()
    client.close()
    return dict(sent=n, refused_full=sum("queue is full" in t for t in texts), turned_away=turned_away,
                rss_before=round(before, 1), rss_full=round(full, 1))


FINISHED = "(b) => { const t = document.querySelector('#text .um-text'); return t && t.dataset.run !== b && " \
           "t.dataset.finished === '1'; }"
STATE = "() => { const t = document.querySelector('#text .um-text'); return t ? [t.dataset.run, t.dataset.finished, " \
        "t.innerText] : [null, null, null]; }"


def page_wave(browser, url: str, batch: list[str]) -> list[dict]:
    """Real page Runs: one browser context (a session) per prompt, each page opened and its prompt typed first;
    then Run pressed on every page at once. Each visitor's first frame (its text shows a new run) and its finished
    run, in seconds from the first press, and the finished text."""
    pages = []
    for prompt in batch:
        pg = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        pg.goto(url + "?decoder=threshold&tau=0.9&block_size=8")
        pg.wait_for_function("() => window.__umScrub && window.__umScrub.run", timeout=120_000)
        pg.fill("#prompt textarea", prompt)
        pages.append((pg, pg.evaluate(STATE)[0]))
    t0, out = time.perf_counter(), [{} for _ in batch]
    for pg, _ in pages:
        pg.click("#run", no_wait_after=True)
    while not all("answer_s" in o for o in out) and time.perf_counter() - t0 < 300:
        for (pg, before), o in zip(pages, out):
            if "answer_s" in o:
                continue
            run, finished, text = pg.evaluate(STATE)
            if run not in (None, before):
                o.setdefault("first_s", time.perf_counter() - t0)
                if finished == "1":
                    o.update(answer_s=time.perf_counter() - t0, text=text)
        time.sleep(0.02)
    for pg, _ in pages:
        pg.context.close()
    return out


def measure_page(url: str, n: int) -> dict:
    """N real page Runs at once against each prompt's page Run alone."""
    batch = prompts(n)
    with chromium() as browser:
        page_wave(browser, url, batch[:1])                                   # warm-up
        solo = [page_wave(browser, url, [q])[0] for q in batch]
        many = page_wave(browser, url, batch)
    solo_s = statistics.mean(o["answer_s"] for o in solo)
    makespan = max(o["answer_s"] for o in many)
    return dict(n=n, page=True, makespan_s=round(makespan, 3), solo_s=round(solo_s, 3),
                makespan_x=round(makespan / solo_s, 2), first_p50=round(pct([o["first_s"] for o in many], .5), 3),
                first_p95=round(pct([o["first_s"] for o in many], .95), 3),
                answer_p50=round(pct([o["answer_s"] for o in many], .5), 3),
                answer_p95=round(pct([o["answer_s"] for o in many], .95), 3),
                identical=all(a.get("text") == b.get("text") for a, b in zip(solo, many)))


def table(rows: list[dict]) -> str:
    head = ("| visitors (one address) | refused | makespan (s) | × one alone | one at a time | answer p50 / p95 (s) "
            "| flooding session: served of sent, its last (s) | second address: answer (s), alone (s) | tokens/s "
            "| RSS (MiB) | answers = solo |\n|---|---|---|---|---|---|---|---|---|---|---|")
    lines = [f"| {r['n']} | {r['refused']} | {r['makespan_s']:.2f} | {r['makespan_x']:.2f}× | {r['serial_x']:.0f}× | "
             f"{r['answer_p50']:.2f} / {r['answer_p95']:.2f} | "
             + (f"{r['flood_served']} of {r['flood']}, {r['flood_last_s']:.2f}" if r.get("flood") else "–") + " | "
             + (f"{r['second_s']:.2f}, {r['second_solo_s']:.2f}" + (" REFUSED" if r["second_refused"] else "")
                if "second_s" in r else "–")
             + f" | {r['tokens_per_s']:.0f} | {r['rss_mib']:.0f} | {'yes' if r['identical'] else 'NO'} |"
             for r in rows]
    return "\n".join([head, *lines])


def warm(url: str, pid: int, args, log: Path) -> None:
    """Waves until one queues no new compile, each followed by the wait for its compiles (the app's log lines)."""
    def count(what: str) -> int:
        return log.read_text().count(what)
    for _ in range(4):
        before = count("unmask: compiling ")
        measure(url, pid, args.n, args.spec)
        while count("unmask: compiling ") > count("unmask: compiled ") and not count("compiled forward off"):
            time.sleep(5)
        if count("unmask: compiling ") == before:
            return


def compare_compile(env: dict, args, argv=None) -> None:
    """The waves eager and compiled (``UNMASK_COMPILE``), alternating ``args.compile`` times: per N, each
    repeat's compiled makespan and tokens/s over the eager one's (ratios within one run of this script)."""
    runs: dict = {"off": [], "on": []}
    for _ in range(args.compile):
        for mode in runs:
            with bench_app.served(args.app_dir, **env, UNMASK_COMPILE=mode) as app:
                if mode == "on":
                    warm(app.url, app.pid, args, app.log)
                runs[mode].append(measure(app.url, app.pid, args.n, args.spec))
            print(mode, table(runs[mode][-1]), sep="\n", flush=True)
    for i, n in enumerate(args.n):
        mk = [on[i]["makespan_s"] / off[i]["makespan_s"] for on, off in zip(runs["on"], runs["off"])]
        tps = [on[i]["tokens_per_s"] / off[i]["tokens_per_s"] for on, off in zip(runs["on"], runs["off"])]
        print(f"N={n}: compiled / eager makespan {statistics.median(mk):.2f}x (range {min(mk):.2f}-{max(mk):.2f}), "
              f"tokens/s {statistics.median(tps):.2f}x (range {min(tps):.2f}-{max(tps):.2f}), "
              f"answers = solo {all(r[i]['identical'] for rs in runs.values() for r in rs)}; paths of differing "
              f"answers: {[r[i]['differing'] for r in runs['on'] if r[i]['differing']]}")
    if args.json:                  # every repeat's rows, each answer's forward paths among them
        provenance.write(args.json, runs, argv)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, nargs="+", default=[1, 4, 12, 32], help="visitors at once, one wave each")
    ap.add_argument("--spec", default="threshold:tau=0.9,block_size=8")
    ap.add_argument("--threads", default="2", help="the server's torch threads (UNMASK_THREADS)")
    ap.add_argument("--max-running", default="", help="UNMASK_MAX_RUNNING for the server (default: its own)")
    ap.add_argument("--static", choices=("auto", "on"), default="auto", help="UNMASK_STATIC for the server: on runs "
                    "the static path eagerly where the compiled forward is off (on a CPU auto is the ragged path), "
                    "so --compile then compares the compiled forward with the path it compiles")
    ap.add_argument("--json", default="", help="also write the rows here")
    ap.add_argument("--page", type=int, default=12, help="also N real page Runs at once in Chromium (0: none)")
    ap.add_argument("--flood", type=int, default=30, help="one session of the class's address sends this many calls "
                    "with each wave (0: none; plain HTTP only)")
    ap.add_argument("--full", type=int, default=400, help="then N heavy decodes at once past the queue's bound")
    ap.add_argument("--second", type=int, default=1, choices=(0, 1), help="one visitor from a second address "
                    "(127.0.0.2) with each wave (plain HTTP only)")
    bench_app.add_app_dir(ap)
    ap.add_argument("--client", choices=("http", "gradio"), default="http", help="plain HTTP on gradio's /call/ "
                    "route (no client-side polling), or gradio_client (which reads its stream every 50 ms)")
    ap.add_argument("--open-sessions", action="store_true", help="each visitor's session made before the clock "
                    "starts (a page visitor's exists from the page's load; an API client's from its first call)")
    ap.add_argument("--compile", type=int, default=0, help="instead: the waves with UNMASK_COMPILE off and on, "
                    "alternating this many times, each on a fresh server (on: after a warm-up until nothing compiles)")
    args = ap.parse_args(argv)
    if args.open_sessions and args.client == "http":
        ap.error("--open-sessions needs --client gradio (each plain call is a new session)")
    if args.client == "gradio" and (args.flood or args.second):
        ap.error("--flood and --second need --client http (set both to 0 with --client gradio)")
    OPEN["on"] = args.open_sessions
    CLIENT["kind"] = args.client
    env = dict(UNMASK_THREADS=args.threads, UNMASK_STATIC=args.static,
               **({"UNMASK_MAX_RUNNING": args.max_running} if args.max_running
                  else {}))   # otherwise the app's defaults: no per-address override
    if args.compile:
        return compare_compile(env, args, argv)
    with bench_app.served(args.app_dir, **env) as app:
        rows = measure(app.url, app.pid, args.n, args.spec, args.flood, args.second)
        print(table(rows), flush=True)
        page = measure_page(app.url, args.page) if args.page else None
        full = measure_full(app.url, app.pid, args.full) if args.full else None
    if page:
        print(f"\npage Runs in Chromium, {page['n']} at once: makespan {page['makespan_s']:.2f} s = "
              f"{page['makespan_x']:.2f}x one alone; first frame p50 / p95 {page['first_p50']:.2f} / "
              f"{page['first_p95']:.2f} s; answers p50 / p95 {page['answer_p50']:.2f} / {page['answer_p95']:.2f} s; "
              f"texts = solo: {'yes' if page['identical'] else 'NO'}")
        rows.append(page)
    if full:
        print(f"\na full queue: {full['sent']} heavy decodes from {full['sent']} sessions of one address at once: "
              f"{full['refused_full']} refused as the queue was full, {full['turned_away']} by gradio's queue; "
              f"RSS {full['rss_before']:.0f} MiB before, {full['rss_full']:.0f} MiB with the queue full")
        rows.append(full)
    if args.json:
        provenance.write(args.json, rows, argv)


if __name__ == "__main__":
    main()
