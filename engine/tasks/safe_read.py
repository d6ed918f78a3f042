"""Reading a task's files so that no file can take the machine (command line only: ``--task FOLDER``, ``--data``).

Only regular files inside the task's folder are opened (no device, FIFO or socket; no link that leads out of the
folder). A file's bytes are checked while they stream, before memory grows: compressed and uncompressed bytes, the
length of one line and the number of rows; a JSON document's nesting depth is bounded before it is parsed; a card's
template may name ``{prompt}`` only, with no format spec. Every refusal is one line (``ConfigError``).
"""

from __future__ import annotations

import gzip
import json
import os
import stat
import string
from pathlib import Path

from engine.errors import ConfigError

MAX_ROWS = 100_000
MAX_LINE = 1 << 20            # bytes in one JSONL line
MAX_BYTES = 256 << 20         # uncompressed bytes of a data file
MAX_FILE = 64 << 20           # bytes on disk of a data file (compressed or not)
MAX_CARD = 1 << 20
MAX_DEPTH = 32                # nesting of [ and { in one JSON document


def regular_file(path: Path, folder: Path | None = None, limit: int = MAX_FILE) -> Path:
    """``path`` if it is a regular file of at most ``limit`` bytes whose real location is inside ``folder``."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise ConfigError(f"{path.name}: unreadable ({type(e).__name__})") from None
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"{path.name}: not a regular file (a device, FIFO, socket or folder is never read)")
    if folder is not None and Path(folder).resolve() not in Path(path).resolve().parents:
        raise ConfigError(f"{path.name}: a link out of its task folder is never followed")
    if st.st_size > limit:
        raise ConfigError(f"{path.name}: {st.st_size} bytes; the limit is {limit}")
    return path


def check_depth(text: str, where: str) -> None:
    """Refuse JSON nested deeper than MAX_DEPTH (counted over brackets outside strings) before parsing it."""
    depth, in_str, esc = 0, False, False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise ConfigError(f"{where}: JSON nested deeper than {MAX_DEPTH}")
        elif ch in "]}":
            depth -= 1


def read_json(path: Path, folder: Path | None = None) -> object:
    """A small JSON file (a card), checked: regular, inside its folder, bounded in bytes and depth."""
    text = regular_file(path, folder, MAX_CARD).read_bytes().decode("utf-8", errors="strict")
    check_depth(text, path.name)
    return json.loads(text)


def lines(path: Path, folder: Path | None = None):
    """The non-empty lines of a JSONL file (``.gz`` read through gzip), each at most MAX_LINE bytes, the file's
    uncompressed bytes at most MAX_BYTES and its rows at most MAX_ROWS; checked while streaming."""
    regular_file(path, folder)
    opener = gzip.open if path.suffix == ".gz" else open
    total, rows = 0, 0
    with opener(path, "rb") as f:
        while True:
            raw = f.readline(MAX_LINE + 1)
            if not raw:
                return
            total += len(raw)
            if len(raw) > MAX_LINE and not raw.endswith(b"\n"):
                raise ConfigError(f"{path.name}, line {rows + 1}: longer than {MAX_LINE} bytes")
            if total > MAX_BYTES:
                raise ConfigError(f"{path.name}: more than {MAX_BYTES} bytes uncompressed")
            if raw.strip():
                rows += 1
                if rows > MAX_ROWS:
                    raise ConfigError(f"{path.name}: more than {MAX_ROWS} problems")
                yield rows, raw.decode("utf-8")


def check_template(template: str, where: str) -> None:
    """A card's template names ``{prompt}`` only, with no conversion or format spec (``{prompt:>2000000000}``
    would ask Python for gigabytes)."""
    try:
        fields = [(name, conv, spec) for _, name, spec, conv in string.Formatter().parse(template) if name is not None]
    except ValueError:
        raise ConfigError(f"{where} needs a template with {{prompt}} only (this one is not a format string)") from None
    if any(name != "prompt" or conv or spec for name, conv, spec in fields):
        raise ConfigError(f"{where} needs a template with {{prompt}} only (no other field, conversion or format spec)")
