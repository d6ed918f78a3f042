"""Benchmarks of the page: figures' layout (``bench_figures``), memory over HTTP (``bench_memory``), the page in
Chromium (``bench_page``), server-side rendering (``bench_render``), what a newcomer meets (``bench_ux``) and the
τ drag against another commit (``bench_tune``)."""

import argparse
from tools import provenance


def bench_main(doc: str, out: str, measure, table, argv=None) -> None:
    """A page benchmark's command line: measure, keep the JSON at ``--out``, print the table."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=out)
    args = ap.parse_args(argv)
    res = measure()
    provenance.write(args.out, res, argv)
    print(table(res))
