"""The engine loop's share alone, in process (no HTTP, no gate): N identities hold a decode each, then a visitor's
default decode; its time against its time alone, in the same process.

    python -m tools.page.bench_share --holders 16,48 --spec remdm:gen_length=8,steps=64,use_cache=false
    cd /tmp/old && python -m tools.page.bench_share ...      # another checkout's engine ("before")

Each holder is its own flow as the page names it (pool, client, session: each its own /24) and starts its decode
again as soon as one ends, until the case is over; ``--lead`` seconds after they start (default 2) the visitor's
decode (the page's default setting on a held-out prompt); ``--spread S``: the holders start one after another over S
seconds, as a flood's calls reach a server over HTTP (the later ones arrive after others ran, each with its head
start: ``ledger.HEAD_START_S``). Prints, per case, the visitor's seconds, its ratio to its
median time alone (``--repeat`` runs), the rounds it took and its decode's share of them (``Trace.meta.shared``).
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

from engine.catalogue.spec import parse_spec
from engine.harness.service import DecodeService
from engine.runtime.jobs import engine_loop
from tools.page.bench_abandon import MODEL
from tools.page.bench_visitors import prompts

VISITOR = "threshold:tau=0.9,block_size=8"       # the page's default decode


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--holders", default="16,48", help="comma-separated counts of identities holding a decode")
    ap.add_argument("--spec", default="remdm:gen_length=8,steps=64,use_cache=false", help="the holders' decode")
    ap.add_argument("--lead", type=float, default=2.0, help="seconds between the holders and the visitor")
    ap.add_argument("--spread", type=float, default=0.0, help="seconds over which the holders start (see above)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of the visitor alone (its median is its time)")
    args = ap.parse_args(argv)
    svc = DecodeService(default_model=MODEL, threads=1)
    prompt, held, visitor = prompts(1)[0], parse_spec(args.spec), parse_spec(VISITOR)

    def run(spec, client, stop=None):
        last = None
        for last in svc.stream(prompt, *spec, page=True, client=client, should_stop=stop):
            pass
        return last
    run(visitor, ("warm", "warm", "warm"))
    alone = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        run(visitor, ("alone", "alone", "alone"))
        alone.append(time.perf_counter() - t0)
    print(f"alone: {statistics.median(alone):.3f} s (median of {args.repeat})")
    for n in (int(x) for x in args.holders.split(",") if x.strip()):
        stop = threading.Event()

        def hold(i):
            time.sleep(args.spread * i / n)
            while not stop.is_set():
                run(held, (f"10.{i}.0.0/24", f"10.{i}.0.1", "s"), stop.is_set)
        threads = [threading.Thread(target=hold, args=(i,)) for i in range(n)]
        [t.start() for t in threads]
        time.sleep(args.spread + args.lead)
        rounds0 = engine_loop().rounds
        t0 = time.perf_counter()
        trace = run(visitor, ("9.9.9.0/24", "9.9.9.9", "visitor"))
        seconds = time.perf_counter() - t0
        print(f"behind {n} holders: {seconds:.3f} s, {seconds / statistics.median(alone):.1f}x alone, "
              f"{engine_loop().rounds - rounds0} rounds, shared by {trace.meta.shared:.1f} decodes on average")
        stop.set()
        [t.join() for t in threads]


if __name__ == "__main__":
    main()
