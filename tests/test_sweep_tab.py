"""The Sweep tab's handler on the batched path: a row joins the plot as each setting finishes."""

from __future__ import annotations

import asyncio

from engine.service import DecodeService
from explorer.page.context import Page
from explorer.page.sweep import run_sweep


def test_the_sweep_streams_a_row_per_finished_setting(sdar_dir):
    service = DecodeService(default_model=str(sdar_dir), max_seconds=60)
    page = Page(service, {}, models=(str(sdar_dir),))

    async def collect():
        return [out async for out in run_sweep(page, str(sdar_dir), "threshold", "0.5,0.9", "4", "", "arith", 6,
                                               0.0, progress=lambda *a, **k: None)]
    outs = asyncio.run(collect())
    tables = [t for _, t, _ in outs if isinstance(t, str)]
    assert len(tables) >= 2 and tables[0] != tables[-1]           # the table grew while the sweep ran
    final_fig, final_table, points = outs[-1]
    assert all(s in final_table for s in ("ar", "threshold:tau=0.5,block_size=4", "threshold:tau=0.9,block_size=4"))
    assert [c[0] if isinstance(c, tuple) else c for c in points["choices"]] == [
        "ar", "threshold:tau=0.5,block_size=4", "threshold:tau=0.9,block_size=4"]
