"""Time of the request body check (``explorer.page.bodylimit``) on adversarial bodies, before and after issue 74.

    python -m tools.page.bench_body                    # 64 KiB and 1 MiB; the old check up to 64 KiB
    python -m tools.page.bench_body --old-max 16384    # the old check on 16 KiB only (it is quadratic)

Each body (``adversarial``) is sent through the whole middleware in process (``BodyLimit``, as the server calls
it) and timed in CPU seconds of the process (the count's thread included); the old check (the regular expression
that stripped JSON strings, kept here as ``old_containers``) is timed on its own up to ``--old-max`` bytes: on
the issue's body it grows with the square of the size (64 KiB took 12.4 s on the probe's server), so 1 MiB would
take about an hour. Prints a Markdown table: body, size, old check (s), new middleware (ms), ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import time

from explorer.page.bodylimit import BODY_FIELDS, BodyLimit

KIB, MIB = 1 << 10, 1 << 20
OLD_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')     # the check before issue 74


def adversarial(size: int) -> dict[str, bytes]:
    """Bodies of ``size`` bytes built to make a string-stripping regex backtrack: a string that opens and never
    closes over escaped quotes (the issue's), the same behind a valid prefix, lone backslashes, many quotes, quotes
    around brackets and commas, escapes before quotes, letters between quotes."""
    def fill(head: bytes, piece: bytes) -> bytes:
        return (head + piece * (size // len(piece) + 1))[:size]
    return {"open over escaped quotes": fill(b'"', b'\\"'), "inside a body": fill(b'{"data": ["', b'\\"'),
            "lone backslashes": fill(b"", b"\\"), "many quotes": fill(b"", b'"'), "quoted brackets": fill(b"", b'"['),
            "quoted commas": fill(b"", b'",'), "escaped backslash, quote": fill(b'"', b'\\\\"'),
            "unterminated then brackets": fill(b'"\\"', b"\\[{,"), "letters and quotes": fill(b"", b'a"')}


def old_containers(body: bytes) -> int:
    bare = OLD_STRING.sub(b"", body)
    return bare.count(b"[") + bare.count(b"{")


def middleware_status(body: bytes) -> int:
    """The middleware's answer to a POST of ``body`` (its route answers 200)."""
    sent = []

    async def route(scope, receive, send):
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})

    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(m):
        sent.append(m)
    scope = dict(type="http", method="POST", path="/gradio_api/queue/join", headers=[])
    # values bounded as for an app whose handlers take none: every comma outside strings counts
    asyncio.run(BodyLimit(route, limit=MIB, max_values=BODY_FIELDS)(scope, receive, send))
    return sent[0]["status"]


def cpu(fn, *args) -> float:
    t0 = time.process_time()
    fn(*args)
    return time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default=f"{64 * KIB},{MIB}", help="body sizes in bytes, comma-separated")
    ap.add_argument("--old-max", type=int, default=64 * KIB, help="largest body the old check is timed on")
    args = ap.parse_args()
    print("| body | bytes | old check (s) | new middleware (ms) | answer |\n|---|---|---|---|---|")
    for size in map(int, args.sizes.split(",")):
        for name, body in adversarial(size).items():
            old = f"{cpu(old_containers, body):.3f}" if size <= args.old_max else "not run"
            new = min(cpu(middleware_status, body) for _ in range(3))
            print(f"| {name} | {size} | {old} | {new * 1000:.1f} | {middleware_status(body)} |", flush=True)


if __name__ == "__main__":
    main()
