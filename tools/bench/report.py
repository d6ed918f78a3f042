"""A benchmark's output: progress lines while it runs, its record (``tools.provenance``) and its table at the end."""

from __future__ import annotations

import argparse
import json
import sys

from tools import provenance


def progress(name: str, value) -> None:
    """One line a step on stderr, cut to 300 characters: what a remote run's log keeps."""
    print(f"{name}: {json.dumps(value, default=str)[:300]}", file=sys.stderr, flush=True)


def bench_main(doc: str, out: str, measure, table, argv=None) -> None:
    """A benchmark's command line with nothing to choose: measure, keep the record at ``--out``, print the table."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=out)
    args = ap.parse_args(argv)
    res = measure()
    provenance.write(args.out, res, argv)
    print(table(res))
