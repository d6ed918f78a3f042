"""Recorded traces the operator opens in the page (``python app.py --trace run.npz``, or a folder in
``UNMASK_TRACES``): a loop recorded from outside (``engine.record``) or any saved Unmask trace, read once at start.
They come only from the operator's paths: a visitor uploads nothing and names no path, and at most picks one of
these by its name (``?trace=NAME``)."""

from __future__ import annotations

import stat
from pathlib import Path

from engine.errors import UserError
from engine.records.trace import Trace, TraceFormatError

MAX_TRACES = 64               # traces one page holds (each a few MiB at most: ``engine.records.trace.MAX_INFLATED``)
RECORDED = "recorded"         # engine.record's decoder name (the engine's, not imported: it loads torch)


def paths_of(specs: list[str]) -> list[Path]:
    """The .npz files the operator names: files as given, a folder's own .npz files (not its subfolders), by name;
    a link is not followed into a folder."""
    out = []
    for spec in specs:
        p = Path(spec).expanduser()
        if p.is_dir():
            out += sorted(f for f in p.iterdir() if f.suffix == ".npz" and stat.S_ISREG(f.lstat().st_mode))
        elif p.is_file():
            out.append(p)
        else:
            raise UserError(f"--trace / UNMASK_TRACES: {str(spec)[:80]!r} is not a trace file or a folder")
    if len(out) > MAX_TRACES:
        raise UserError(f"--trace / UNMASK_TRACES: {len(out)} traces; the page holds at most {MAX_TRACES}")
    return out


def load_recorded(specs: list[str]) -> dict[str, Trace]:
    """name (the file's stem; a repeated one gets -2, -3) -> its trace; a file that is not a trace stops the start
    with one line."""
    out: dict[str, Trace] = {}
    for p in paths_of(specs):
        try:
            tr = Trace.load(p)
        except (TraceFormatError, OSError) as e:
            raise UserError(f"{p.name}: not a trace ({str(e)[:120]})") from None
        if not tr.records:
            raise UserError(f"{p.name}: a trace without a forward")
        name, k = p.stem, 2
        while name in out:
            name, k = f"{p.stem}-{k}", k + 1
        out[name] = tr
    return out


def on_load(page, values: dict):
    """The operator's recorded trace a page load shows (the one ``?trace=`` names, else the first: a name not offered
    is left out of ``values`` with a warning, ``share.url_values``), unless the link names a decoder (then its
    pre-baked example shows); None: none."""
    rec, name = page.recorded, values.get("trace")
    if not rec or "decoder" in values:
        return None
    return rec[name] if name in rec else next(iter(rec.values()))


def note(meta) -> str | None:
    """The summary's line on a recorded run: how its commits were read, and what its views cannot show."""
    if meta.decoder != RECORDED:
        return None
    loop = (meta.summary.get("recorded") or {}).get("loop") or "a generate loop"
    closed = (meta.summary.get("recorded") or {}).get("closed", True)
    return (f"Recorded from outside ({loop}): a commit is a [MASK] seen as a token in the next forward's input "
            "(reason \"seen committed\"), a revision a token seen changed; the views of a rule's own fields (a "
            "verifier's verdicts, a router, a cache's drift) need one of Unmask's decoders."
            + ("" if closed else " The last forward's writes are unknown: the loop's result was not given."))
