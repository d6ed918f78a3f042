"""A task folder of one's own cannot take the machine (engine.tasks.safe_read): devices, FIFOs and links out of the
folder are never read; bytes, line length, rows and JSON depth are refused while streaming, before memory grows; a
card's template cannot ask for a huge format. Each refusal is one line."""

from __future__ import annotations

import gzip
import json
import os
import time
import tracemalloc
from pathlib import Path

import pytest

from engine.errors import ConfigError
from engine.tasks import load_task_file

CARD = {"name": "mine", "grader": "number"}
ROW = json.dumps({"id": "a", "prompt": "What is 2 + 3?", "answer": "#### 5"}) + "\n"


def folder(tmp_path: Path, card=CARD, data: str | None = ROW) -> Path:
    f = tmp_path / "task"
    f.mkdir()
    (f / "card.json").write_text(json.dumps(card))
    if data is not None:
        (f / "data.jsonl").write_text(data)
    return f


def refused(path: Path, match: str) -> str:
    with pytest.raises(ConfigError, match=match) as e:
        load_task_file(str(path))
    assert "\n" not in str(e.value)
    return str(e.value)


def test_a_good_folder_loads(tmp_path):
    assert load_task_file(str(folder(tmp_path))) == "mine"


def test_data_linked_to_a_device_is_never_read(tmp_path):
    f = folder(tmp_path, data=None)
    (f / "data.jsonl").symlink_to("/dev/zero")
    refused(f, "not a regular file")


def test_a_fifo_is_never_opened(tmp_path):
    f = folder(tmp_path, data=None)
    os.mkfifo(f / "data.jsonl")
    t0 = time.monotonic()
    refused(f, "not a regular file")
    assert time.monotonic() - t0 < 5


def test_a_link_out_of_the_folder_is_never_followed(tmp_path):
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_text(ROW)
    f = folder(tmp_path, data=None)
    (f / "data.jsonl").symlink_to(outside)
    refused(f, "link out of its task folder")


def test_a_gzip_holding_one_huge_line_is_refused_before_memory_grows(tmp_path):
    f = folder(tmp_path, data=None)
    with gzip.open(f / "data.jsonl.gz", "wb", compresslevel=9) as z:
        chunk = b"x" * (1 << 20)
        for _ in range(64):                      # 64 MiB in one line, a few kB compressed
            z.write(chunk)
    tracemalloc.start()
    refused(f, "longer than")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 16 << 20


def test_too_many_rows_are_refused_while_streaming(tmp_path):
    f = folder(tmp_path, data=None)
    with gzip.open(f / "data.jsonl.gz", "wb") as z:
        z.write(ROW.encode() * 300_000)
    t0 = time.monotonic()
    refused(f, "more than 100000 problems")
    assert time.monotonic() - t0 < 10


def test_a_card_template_cannot_ask_for_a_huge_format(tmp_path):
    refused(folder(tmp_path, card={**CARD, "template": "{prompt:>2000000000}"}), "format spec")
    (tmp_path / "task").rename(tmp_path / "t1")
    refused(folder(tmp_path, card={**CARD, "template": "{prompt.__class__}"}), "prompt")


def test_deep_json_is_refused_without_a_recursion_error(tmp_path):
    f = folder(tmp_path)
    (f / "card.json").write_text("[" * 100_000 + "]" * 100_000)
    refused(f, "nested deeper")
    (tmp_path / "task").rename(tmp_path / "t1")
    deep = '{"id": "a", "prompt": "p", "answer": "a", "x": ' + "[" * 50_000 + "]" * 50_000 + "}\n"
    refused(folder(tmp_path, data=deep), "nested deeper")
