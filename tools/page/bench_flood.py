"""Visitors behind a flood: one client fills every running place with heavy decodes, then honest visitors arrive.

    python -m tools.page.bench_flood                      # the app's default settings (a few minutes on two cores)
    python -m tools.page.bench_flood --app-dir /tmp/old   # another checkout's app.py (an earlier commit: "before")
    python -m tools.page.bench_flood --identities 16,48,272 --budget 20 --trials 5   # many identities, one decode each
    python -m tools.page.bench_flood --pairs 10 --budget 4             # two newcomers beside a client's two decodes
    python -m tools.page.bench_flood --identities 16,48 --flood-spec remdm:gen_length=8,steps=64,use_cache=false
    python -m tools.page.bench_flood --burst 134 --holders 64 --budget 20   # fresh identities beside holders

Starts ``python app.py`` on a loopback port with its default settings. Each client connects from its own loopback
address (127.0.0.2 floods, the visitors from 127.0.0.10 on), so the app tells them apart as it would a Space's
visitors. First each visitor's prompt alone, one after another (the median of ``--repeat`` runs: its time alone).
Then, per case, the flood: ``--flood`` (default 16, the CPU's running places) heavy ``decode`` calls of one client
(AR over 256 slots without a cache, far more than the budget), each from its own session; ``--lead`` seconds after
the server has every call of the flood (default 2) one visitor (case "one") or twelve at once (case "twelve") call
``decode`` with the page's default setting on held-out prompts; last, the twelve with no flood (what twelve at once
cost on this machine anyway). Each visitor's time runs from its POST to its answer.
Prints per case each visitor's time against its time alone (the issue's target: within 3x), then closes the
flood's streams (its decodes stop) and lets the server settle before the next case.

``--identities N,M``: instead, per N, N clients (each its own loopback address and /24, 127.1.0.2 on) send one heavy
decode each, so no client holds more than another (issue 65: the places rule never acted and newcomers waited out whole
budgets), and ``--lead`` seconds later one visitor calls ``decode``; ``--budget`` sets ``UNMASK_MAX_SECONDS``;
``--trials`` repeats each (the table's "visitors" counts the trials; its median and worst are over them).

``--flood-spec SPEC``: the flood's (or the identities', or the holders') decode instead of the heavy one: a small
but slow one (issue 74: ``remdm:gen_length=8,steps=64,use_cache=false``, 1/16 of the page's default size by
generation length times canvas, several times its time) held by many identities.

``--burst N --holders M``: M identities (127.1.x.2) each hold a heavy decode; ``--lead`` seconds later N fresh
identities (127.2.x.2, each its own /24) and a class of 20 (sessions of 127.3.0.2) call ``decode`` with the page's
default setting at once, and the visitor (127.0.0.10) with them: its time against alone, and how many of the burst,
the class and the visitor were refused (issue 74, finding 4: a per-burst bound refused them all) and how many
answers were cut at the budget (``limit``).

``--page-runs N``: N page Runs at once (gradio's queue, as the page sends them), each from its own /24
(127.4.x.2) with its own free-text prompt (so each decodes: no trace cache), while a bystander GETs
``robots.txt`` every 0.2 s: the last answer, how many were refused, cut at the budget (the page's warning) or
failed, and the bystander's GETs: the slowest, the median, how many took over 100 ms (issue 74: a class of 40 got
its last answer at 30-130 s).

``--extra N``: N ``call/decode`` bodies carrying 240 000 extra numbers each (0.96 MB), eight at a time: how many
were refused before parsing and the server's RSS before and after (issue 74, finding 5: +772 MiB for 60).

Every ``decode`` answer carries ``timing`` (``explorer.page.api.timing``): the visitor's row splits its time into
HTTP and gradio's queue (its seconds less ``answer_s``), the wait at the gate (``gate_s``), the wait in the engine
loop (``answer_s`` less ``gate_s`` and ``engine_s``) and its own rounds (``engine_s``).

``--pairs N``: N trials of one client (127.0.0.2) running two heavy decodes and, 0.8 s later, two newcomers (their
own addresses) calling ``decode`` at once; counts the decodes that failed (issue 65: every trial that met the
condition failed the first client's two decodes with ``{"error": null}``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from tools.local_app import running_app
from tools.page.bench_abandon import HEAVY
from tools.page.bench_visitors import prompts
from tools import provenance

SPEC = "threshold:tau=0.9,block_size=8"       # the page's default decode of a held-out prompt (~0.66 s alone)


def decode(url: str, prompt: str, spec: str, source: str, stop: threading.Event | None = None,
           posted: list | None = None) -> dict:
    """One ``decode`` call over gradio's plain HTTP route from ``source``: its seconds from its POST to its answer
    or refusal; with ``stop``, the call's stream is closed once it is set (the client leaves; its decode stops);
    ``posted`` is appended to once the server has the call. The client is made before the clock starts: this
    script's own threads (a flood of 48-272 streams read in one process) made a client take up to 2 s, which
    was counted as the visitor's time and let the flood arrive after the visitor."""
    import httpx
    with httpx.Client(base_url=url, timeout=180, transport=httpx.HTTPTransport(local_address=source)) as client:
        t0 = time.perf_counter()
        event_id = client.post("gradio_api/call/decode", json={"data": [prompt, spec, "", ""]}).json()["event_id"]
        if posted is not None:
            posted.append(event_id)
        event, out = None, {}
        with client.stream("GET", f"gradio_api/call/decode/{event_id}") as stream:
            for line in stream.iter_lines():
                if stop is not None and stop.is_set():
                    break
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event == "complete":
                    out["answer"] = json.loads(line[6:])[0]
                    break
                elif line.startswith("data: ") and event == "error":
                    out["refused"] = line[6:300]
                    break
    return dict(out, seconds=time.perf_counter() - t0)


def at_once(calls: list) -> list[dict]:
    """Each (url, prompt, spec, source[, stop[, posted]]) in its own thread; their results in order."""
    results = [None] * len(calls)

    def run(i):
        results[i] = decode(*calls[i])
    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    [t.start() for t in threads]
    [t.join() for t in threads]
    return results


def arrived(posted: list, n: int, limit_s: float = 120) -> None:
    """Wait until the server has all ``n`` calls of a flood (the lead counts from then)."""
    t0 = time.monotonic()
    while len(posted) < n and time.monotonic() - t0 < limit_s:
        time.sleep(0.05)


def case(url: str, visitors: list[str], alone: dict, n_flood: int, lead_s: float, identities: bool = False,
         spec: str = HEAVY) -> list[dict]:
    """The flood, then the visitors ``lead_s`` later: each visitor's seconds and ratio to its time alone. The flood
    comes from one address, or (``identities``) from one address per decode, each its own /24 (a pool of proxies
    across networks, which the per-network bound does not catch)."""
    stop, posted = threading.Event(), []
    source = (lambda i: f"127.{1 + i // 250}.{i % 250}.2") if identities else (lambda i: "127.0.0.2")
    flood = [(url, "Tell a story about a fox.", spec, source(i), stop, posted) for i in range(n_flood)]
    flooding = threading.Thread(target=at_once, args=(flood,))
    flooding.start()
    arrived(posted, n_flood)
    time.sleep(lead_s)
    rows = at_once([(url, p, SPEC, f"127.0.0.{10 + i}") for i, p in enumerate(visitors)])
    stop.set()
    flooding.join()
    time.sleep(3)                                   # the flood's decodes stop at their next forward
    return [dict(r, alone=alone[p], ratio=r["seconds"] / alone[p]) for p, r in zip(visitors, rows)]


def burst(url: str, visitor: str, alone: dict, n_burst: int, n_holders: int, lead_s: float, spec: str) -> dict:
    """Holders, then ``lead_s`` later a burst of fresh identities, a class of 20 behind one address and the visitor
    at once: the visitor's row, and the refusals of each group."""
    stop, posted = threading.Event(), []
    holders = [(url, "Tell a story about a fox.", spec, f"127.1.{i % 250}.{2 + i // 250}", stop, posted)
               for i in range(n_holders)]
    holding = threading.Thread(target=at_once, args=(holders,))
    holding.start()
    arrived(posted, n_holders)
    time.sleep(lead_s)
    calls = [(url, visitor, SPEC, "127.0.0.10")] + [(url, "3+4=", SPEC, "127.3.0.2")] * 20 + [
        (url, "5+1=", SPEC, f"127.{2 + i // 250}.{i % 250}.2") for i in range(n_burst)]
    rows = at_once(calls)
    stop.set()
    holding.join()
    time.sleep(3)
    refused = lambda part: sum("refused" in r for r in part)  # noqa: E731
    cut = lambda part: sum(bool((r.get("answer") or {}).get("limit")) for r in part)  # noqa: E731
    return dict(rows[0], alone=alone[visitor], ratio=rows[0]["seconds"] / alone[visitor],
                class_refused=refused(rows[1:21]), burst_refused=refused(rows[21:]),
                class_cut=cut(rows[1:21]), burst_cut=cut(rows[21:]),
                why=sorted({r["refused"][:120] for r in rows if "refused" in r}),
                burst_median_s=statistics.median(r["seconds"] for r in rows[21:]))


def page_run(url: str, fn: int, data: list, source: str) -> dict:
    """One page Run over gradio's queue from ``source`` (join, then the session's stream): its seconds, whether it
    succeeded, and the warnings it was shown (a limit, a cut drawing)."""
    import httpx
    session, t0, out = uuid.uuid4().hex[:11], time.perf_counter(), {"warnings": []}
    with httpx.Client(base_url=url, timeout=300, transport=httpx.HTTPTransport(local_address=source)) as client:
        client.post("gradio_api/queue/join", json={"data": data, "fn_index": fn, "session_hash": session,
                                                   "event_data": None, "trigger_id": None})
        with client.stream("GET", f"gradio_api/queue/data?session_hash={session}") as stream:
            for line in stream.iter_lines():     # only the messages read here are parsed: 40 streams of figures
                #                                     parsed in this one process slowed it more than the server
                wanted = line.startswith("data: ") and ('"log"' in line[:40] or "process_completed" in line[:40])
                msg = json.loads(line[6:]) if wanted else {}
                if msg.get("msg") == "log":
                    out["warnings"].append(str(msg.get("log"))[:160])
                elif msg.get("msg") == "process_completed":
                    out["ok"] = bool(msg.get("success"))
                    out["error"] = None if out["ok"] else str(msg.get("output", {}).get("error"))[:160]
                    break
    return dict(out, seconds=time.perf_counter() - t0)


BYSTANDER = """import sys, time, urllib.request
while True:
    t0 = time.perf_counter()
    urllib.request.urlopen(sys.argv[1] + "robots.txt", timeout=60).read()
    print(time.perf_counter() - t0, flush=True)
    time.sleep(0.2)
"""


def page_runs(url: str, n: int) -> dict:
    """``n`` page Runs at once from ``n`` /24s, each its own free-text prompt, beside a bystander's GETs."""
    import httpx
    from tools.page.bench_memory import event
    cfg = httpx.get(url + "config").json()
    fn, data = event(cfg, "on_run")
    box = next(i for i, c in enumerate(next(d for d in cfg["dependencies"] if d["id"] == fn)["inputs"])
               if {c["id"]: c for c in cfg["components"]}[c]["type"] == "textbox")
    rows, texts = [None] * n, prompts(n)

    def run(i):
        mine = list(data)
        mine[box] = f"{texts[i]} (visitor {i})"          # free text: decoded, not read from the cache
        rows[i] = page_run(url, fn, mine, f"127.4.{i}.2")
    # the bystander in a process of its own: in this one, 40 threads reading streams would delay its GETs
    watcher = subprocess.Popen([sys.executable, "-c", BYSTANDER, url], stdout=subprocess.PIPE, text=True)
    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    watcher.terminate()
    gets = [float(x) for x in watcher.communicate()[0].split()]
    cut = lambda r: any("budget" in w for w in r["warnings"])  # noqa: E731
    return dict(last_s=max(r["seconds"] for r in rows), median_s=statistics.median(r["seconds"] for r in rows),
                refused=sum(not r.get("ok") and "queue" in str(r.get("error")) for r in rows),
                failed=sum(not r.get("ok") for r in rows), cut=sum(cut(r) for r in rows),
                worst_get_s=max(gets, default=0.0), median_get_s=statistics.median(gets) if gets else 0.0,
                gets=len(gets), gets_over_100ms=sum(g > 0.1 for g in gets),
                errors=sorted({str(r.get("error")) for r in rows if not r.get("ok")})[:3])


def extra_inputs(url: str, pid: int, n: int) -> dict:
    """``n`` ``call/decode`` bodies, each with 240 000 extra numbers, eight at a time: refusals and RSS."""
    import httpx
    from concurrent.futures import ThreadPoolExecutor
    from tools.page.bench_memory import rss_mib
    body = json.dumps({"data": ["3+4=", SPEC, "", "", *([1.5] * 240_000)]}).encode()
    before = rss_mib(pid)

    def one(_):
        return httpx.post(url + "gradio_api/call/decode", content=body, timeout=120,
                          headers={"Content-Type": "application/json"}).status_code
    with ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(one, range(n)))
    time.sleep(2)
    return dict(refused=sum(c >= 400 for c in codes), of=n, body_mb=len(body) / 1e6, rss_before=before,
                rss_after=rss_mib(pid))


def pairs(url: str, trials: int) -> str:
    """Failed decodes over ``trials`` of two heavy decodes of one client and two newcomers arriving together."""
    failed = total = 0
    for _ in range(trials):
        stop = threading.Event()
        holders = threading.Thread(target=lambda: rows.extend(at_once(
            [(url, "Tell a story about a fox.", HEAVY, "127.0.0.2", stop)] * 2)))
        rows: list = []
        holders.start()
        time.sleep(0.8)
        rows += at_once([(url, p, SPEC, f"127.0.0.{3 + i}") for i, p in enumerate(["3+4=", "5+1="])])
        holders.join()
        failed += sum("answer" not in r for r in rows)
        total += len(rows)
    return f"{failed} of {total} decodes failed in {trials} trials"


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--flood", type=int, default=16, help="the flooding client's heavy decodes")
    ap.add_argument("--lead", type=float, default=2.0, help="seconds between the flood and the visitors")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each prompt alone (its median is its time)")
    ap.add_argument("--app-dir", default="", help="serve another checkout's app.py (an earlier commit)")
    ap.add_argument("--json", default="", help="also write the rows here")
    ap.add_argument("--identities", default="", help="comma-separated counts of one-decode clients (see above)")
    ap.add_argument("--budget", type=float, default=0, help="UNMASK_MAX_SECONDS for the app (0: its default)")
    ap.add_argument("--trials", type=int, default=1, help="with --identities: flood and newcomer this many times")
    ap.add_argument("--pairs", type=int, default=0, help="trials of two newcomers beside two decodes (see above)")
    ap.add_argument("--flood-spec", default=HEAVY, help="the flood's decode (default: the heavy one; see above)")
    ap.add_argument("--burst", type=int, default=0, help="fresh identities beside --holders (see above)")
    ap.add_argument("--holders", type=int, default=64, help="with --burst: identities holding a decode each")
    ap.add_argument("--page-runs", type=int, default=0, help="page Runs at once, one /24 each (see above)")
    ap.add_argument("--extra", type=int, default=0, help="decode bodies with extra inputs (see above)")
    return ap


def scenarios(url: str, pid: int, args) -> dict | str:
    """The scenario the flags name: its rows by case (or a line for --pairs, a dict for the others)."""
    if args.pairs:
        return pairs(url, args.pairs)
    if args.page_runs:
        return page_runs(url, args.page_runs)
    if args.extra:
        return extra_inputs(url, pid, args.extra)
    visitors = prompts(12)
    counts = [int(n) for n in args.identities.split(",") if n.strip()]
    alone = {p: statistics.median(decode(url, p, SPEC, "127.0.0.9")["seconds"] for _ in range(args.repeat))
             for p in (visitors[:1] if counts or args.burst else visitors)}
    if args.burst:
        return {f"{args.burst} fresh beside {args.holders} holders": [
            burst(url, visitors[0], alone, args.burst, args.holders, args.lead, args.flood_spec)
            for _ in range(args.trials)]}
    if counts:
        return {f"behind {n} identities": [row for _ in range(args.trials)
                                           for row in case(url, visitors[:1], alone, n, args.lead, True,
                                                           args.flood_spec)]
                for n in counts}
    return {"one": case(url, visitors[:1], alone, args.flood, args.lead),
            "twelve": case(url, visitors, alone, args.flood, args.lead),
            # twelve at once cost more than one alone with no flood at all: the floor of "twelve"
            "twelve, no flood": case(url, visitors, alone, 0, 0.0)}


def where(r: dict) -> str:
    """Where a visitor's seconds went (its answer's ``timing``): HTTP and gradio's queue, the gate, the engine
    loop's wait, its own rounds."""
    t = (r.get("answer") or {}).get("timing")
    if not t:
        return "no timing"
    engine = t["engine_s"] or 0.0
    return (f"http+queue {r['seconds'] - t['answer_s']:.2f}, gate {t['gate_s']:.2f}, engine wait "
            f"{t['answer_s'] - t['gate_s'] - engine:.2f}, own rounds {engine:.2f} (shared by {t['shared']})")


def report(out: dict) -> None:
    print("| case | visitors | alone (s, median) | behind the flood (s, median) | worst (s) | ratio median | "
          "ratio worst | refused |\n|---|---|---|---|---|---|---|---|")
    for name, rows in out.items():
        ratios = [r["ratio"] for r in rows]
        refused = sum("refused" in r for r in rows)
        print(f"| {name} | {len(rows)} | {statistics.median(r['alone'] for r in rows):.2f} | "
              f"{statistics.median(r['seconds'] for r in rows):.2f} | {max(r['seconds'] for r in rows):.2f} | "
              f"{statistics.median(ratios):.1f}x | {max(ratios):.1f}x | {refused} |")
        print("per trial:", ", ".join(f"{r['seconds']:.2f} s ({r['ratio']:.1f}x; {where(r)})" for r in rows))
        for r in rows:
            if "burst_refused" in r:
                print(f"burst refused {r['burst_refused']}, cut {r['burst_cut']} (median {r['burst_median_s']:.2f} s), "
                      f"class refused {r['class_refused']}, cut {r['class_cut']} of 20; why: {r['why']}")


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    env = {"root": Path(args.app_dir)} if args.app_dir else {}
    if args.budget:
        env["UNMASK_MAX_SECONDS"] = f"{args.budget:g}"
    with tempfile.TemporaryDirectory() as tmp, running_app(Path(tmp), start_s=600, **env) as (url, proc):
        decode(url, prompts(1)[0], SPEC, "127.0.0.9")                # warm-up
        out = scenarios(url, proc.pid, args)
    if isinstance(out, dict) and all(isinstance(v, list) for v in out.values()):
        report(out)
    else:
        print(out)
    if args.json:
        provenance.write(args.json, out, argv)


if __name__ == "__main__":
    main()
