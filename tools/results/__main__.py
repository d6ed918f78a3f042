"""The docs' tables drawn again from their records (``results/``).

    python -m tools.results            # rewrite every table between its markers in docs/results.md and README.md
    python -m tools.results --check    # exit 1, naming each table that differs from a fresh drawing (CI runs it)

A table in a doc sits between ``<!-- table NAME -->`` and ``<!-- /table -->``; NAME is an entry of
``tools.results.tables.TABLES``, which says which record it reads, its columns and the code it measures. Prose
around the markers stays hand-written. A marker naming no table, or a table no doc shows, is an error. The README's
"Results at a glance" is the block ``glance`` (``tools.results.glance``): one line per claim, its figures computed
from the same records.
"""

from __future__ import annotations

import argparse
import re
import sys

from tools.provenance import ROOT
from tools.results import glance
from tools.results.render import draw
from tools.results.tables import TABLES

DOCS = ("docs/results.md", "README.md")
BLOCK = re.compile(r"(<!-- table (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /table -->)", re.S)


def redraw(text: str, drawn: dict[str, str], seen: set[str]) -> str:
    def one(m: re.Match) -> str:
        name = m["name"]
        if name not in drawn:
            raise SystemExit(f"a marker names table {name!r}, which tools/results/tables.py does not define")
        seen.add(name)
        return f"{m[1]}{drawn[name]}\n{m[4]}"
    return BLOCK.sub(one, text)


def drawings() -> dict[str, str]:
    """Every table by name, and ``glance``: the README's list of claims, linking docs/results.md's sections."""
    return {**{t.name: draw(t) for t in TABLES}, "glance": glance.draw((ROOT / DOCS[0]).read_text())}


def differing(docs=DOCS) -> tuple[dict[str, str], list[str]]:
    """Every doc's redrawn text, and the names of the tables whose committed text differs from the drawing."""
    drawn, seen, changed, out = drawings(), set(), [], {}
    for doc in docs:
        text = (ROOT / doc).read_text()
        new = redraw(text, drawn, seen)
        out[doc] = new
        for m in BLOCK.finditer(text):
            if m["body"] != drawn[m["name"]] + "\n":
                changed.append(m["name"])
    missing = sorted(set(drawn) - seen)
    if missing:
        raise SystemExit(f"tables no doc shows: {', '.join(missing)} (add their markers or drop them)")
    return out, changed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a table differs")
    args = ap.parse_args(argv)
    out, changed = differing()
    if args.check:
        if changed:
            print(f"tables that differ from their records: {', '.join(changed)}; run `python -m tools.results`")
            return 1
        print(f"{len(TABLES)} tables and the README's claims equal to their records")
        return 0
    for doc, text in out.items():
        (ROOT / doc).write_text(text)
    print(f"{len(TABLES)} tables drawn; changed: {', '.join(changed) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
