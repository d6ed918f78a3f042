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


def test_a_heavy_run_holds_its_slot_no_longer_than_the_budget_plus_two_seconds(tmp_path):
    import time
    service = DecodeService(default_model="tiny", max_seconds=2)
    page = Page(service, {}, export_dir=ExportDir(str(tmp_path)), models=("tiny",))

    async def go():
        return [out async for out in decode(page, 12, "Ann has 3 pens . How many pens does she have now ?", "tiny",
                                            "ar", dict(gen_length=256, stop_at_eos=False, use_cache=False), "q",
                                            None)]
    t0 = time.perf_counter()
    outs = asyncio.run(go())
    took = time.perf_counter() - t0
    trace = outs[-1][-5]                              # the trace state output of the finished frame
    print(f"heavy run: {took:.2f} s at a 2 s budget, {len(trace.records)} forwards")
    assert took <= 2 + 2 and "time budget" in trace.meta["limit"] and len(trace.records) < 256
