"""A table of the docs drawn from its record: the rows, then one caption line naming the record's provenance and,
when the code it measures changed after the record's commit, saying so.

Everything here is a function of the record and of git's history, so the same commit always draws the same text
(the check in CI compares the committed docs with a fresh drawing).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable

from tools.provenance import ROOT, git

Cell = Callable[[dict], object]


@dataclass(frozen=True)
class Column:
    header: str
    value: str | Cell                 # a key of the row (dotted for nested), or a function of the row
    fmt: str = ""                     # a format spec for numbers; "" prints the value as it is

    def cell(self, row: dict) -> str:
        v = self.value(row) if callable(self.value) else dig(row, self.value)
        if v is None:
            return "–"
        if self.fmt and isinstance(v, (int, float)) and not isinstance(v, bool):
            return format(v, self.fmt)
        return str(v)


@dataclass(frozen=True)
class Table:
    """One table of the docs: its rows are ``rows`` (a dotted path into the record, or a function of it)."""
    name: str                         # the marker's name: <!-- table NAME --> ... <!-- /table -->
    record: str                       # path under results/
    rows: str | Callable[[dict], list[dict]]
    columns: tuple[Column, ...]
    measures: tuple[str, ...] = ()    # the code the figures depend on: newer commits there make the record stale
    note: str = ""                    # a fixed sentence for the caption (conditions not in the record)
    keep: Callable[[dict], bool] = field(default=lambda row: True)

    def load(self) -> dict:
        """The record; one stored as a bare list of rows (before ``tools/provenance.py``) reads as ``rows``."""
        record = json.loads((ROOT / "results" / self.record).read_text())
        return record if isinstance(record, dict) else {"rows": record}

    def lines(self, record: dict) -> list[str]:
        rows = self.rows(record) if callable(self.rows) else dig(record, self.rows)
        rows = [r for r in rows if self.keep(r)]
        head = "| " + " | ".join(c.header for c in self.columns) + " |"
        sep = "|" + "|".join("---" for _ in self.columns) + "|"
        return [head, sep] + ["| " + " | ".join(c.cell(r) for c in self.columns) + " |" for r in rows]


def dig(x, path: str):
    for part in path.split(".") if path else ():
        if isinstance(x, list):
            x = x[int(part)]
        elif isinstance(x, dict):
            x = x.get(part)
        else:
            return None
    return x


def short(commit: str | None) -> str:
    return commit[:7] if commit else "?"


def origin(table: Table, record: dict) -> tuple[str | None, str]:
    """The commit the figures were measured at, and the caption's words for where the record came from."""
    prov = record.get("provenance") if isinstance(record, dict) else None
    if prov:
        m = prov.get("machine") or {}
        gpu = (m.get("gpu") or {}).get("name")
        load = "load {} → {}".format(*(x[0] if x else "?" for x in (m.get("load_at_start"), m.get("load_at_end"))))
        loop = m.get("loop_ms_at_start") and "reference loop {} → {} ms".format(m["loop_ms_at_start"],
                                                                               m.get("loop_ms_at_end"))
        where = ", ".join(filter(None, [gpu, m.get("cpu"), f"{m.get('cores')} cores", load, loop]))
        tree = {True: "clean", False: "with uncommitted changes", None: "tree unknown"}[prov.get("clean")]
        torch = (prov.get("versions") or {}).get("torch")
        return prov.get("commit"), (f"commit {short(prov.get('commit'))} ({tree}), {prov.get('date', '?')[:10]}, "
                                    f"{where}, torch {torch}; `{prov.get('command')}`")
    stored = git("log", "-1", "--format=%H", "--", f"results/{table.record}") or None
    return stored, (f"no provenance (written before `tools/provenance.py`); stored in commit {short(stored)}, "
                    "so measured at that commit or before it")


def staleness(commit: str | None, measures: tuple[str, ...]) -> str:
    """'' if no commit after ``commit`` touched ``measures``; else the caption's warning, naming the newest one."""
    if not measures or not commit:
        return ""
    if git("cat-file", "-t", commit) != "commit":
        return f" Its commit {short(commit)} is not in this repository's history: freshness unknown."
    # the first such commit, not the latest: once a record is stale its caption stays the same as code moves on
    newer = git("log", "--reverse", "--format=%h %cs", f"{commit}..HEAD", "--", *measures).splitlines()
    if not newer:
        return ""
    h, date = newer[0].split()
    return (f" **Older than the code it measures**: {', '.join(f'`{m}`' for m in measures)} changed since "
            f"(first in {h}, {date}).")


def draw(table: Table) -> str:
    """The table's Markdown: rows, then its caption."""
    record = table.load()
    commit, where = origin(table, record)
    caption = f"*Record `results/{table.record}`: {where}.{staleness(commit, table.measures)}"
    caption += (f" {table.note}*" if table.note else "*")
    return "\n".join(table.lines(record) + ["", caption])
