"""A soak of the page's Run on one cached trace: memory stays flat (the issue's probe saw RSS double over 45 Runs).
Marked ``load``; in-process, bounded (220 Runs of a short cached decode)."""

import asyncio
import os

import pytest

from engine.service import DecodeService
from explorer.export_dir import ExportDir
from explorer.page.context import Page
from explorer.page.decode_tab import decode
from explorer.store import TraceStore

pytestmark = pytest.mark.load


def rss_bytes() -> int:
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def one_run(page) -> None:
    async def go():
        return [out async for out in decode(page, 12, "Ann has 3 pens . How many pens does she have now ?",
                                            "tiny", "threshold", dict(block_size=4, gen_length=32), "q", None)]
    outs = asyncio.run(go())
    assert outs and outs[-1][-1]                      # the export files of the finished run


def test_rss_stays_flat_over_200_cached_runs(tmp_path):
    service = DecodeService(default_model="tiny", max_seconds=30)
    page = Page(service, {}, store=TraceStore(str(tmp_path / "traces")), export_dir=ExportDir(str(tmp_path)),
                models=("tiny",))
    for _ in range(20):                               # warm-up: the first decode, then cache hits
        one_run(page)
    before = rss_bytes()
    for _ in range(200):
        one_run(page)
    after = rss_bytes()
    print(f"RSS {before / 2**20:.0f} -> {after / 2**20:.0f} MiB over 200 Runs")
    assert after <= 1.10 * before
