"""A soak of the page's Run on one cached trace: memory stays flat (the issue's probe saw RSS double over 45 Runs).
Marked ``load``; in-process, bounded (220 Runs of a short cached decode)."""

import asyncio
import os

import pytest

from engine.harness.service import DecodeService
from explorer.export_dir import ExportDir
from explorer.page.context import Page
from engine.records.trace import Trace
from explorer.layout import build_demo
from explorer.store import TraceStore

pytestmark = pytest.mark.load


def rss_bytes() -> int:
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


PROMPT = "Ann has 3 pens . How many pens does she have now ?"


def page_run(page, session: str = "soak", prompt: str = PROMPT, **controls):
    """The page's own Run handler (as the browser calls it, gradio passing the request first), with these control
    values (by elem_id), from one session."""
    from types import SimpleNamespace
    demo = build_demo(page)
    fn = next(f for f in demo.fns.values() if f.name == "on_run")
    values = dict(prompt=prompt, model="tiny", **controls)
    args = [SimpleNamespace(session_hash=session)] + [values.get(getattr(c, "elem_id", None), c.value)
                                                      for c in fn.inputs]

    def run() -> list[dict]:
        async def go():
            return [out async for out in fn.fn(*args)]
        return asyncio.run(go())
    return run


def final(outs: list[dict], kind):
    return next(v for v in outs[-1].values() if isinstance(v, kind))


def test_rss_stays_flat_over_200_cached_runs(tmp_path):
    service = DecodeService(default_model="tiny", max_seconds=30)
    page = Page(service, {}, store=TraceStore(str(tmp_path / "traces")), export_dir=ExportDir(str(tmp_path)),
                models=("tiny",))
    one_run = page_run(page, decoder="threshold", block_size=4, gen_length=32)
    for _ in range(20):                               # warm-up: the first decode, then cache hits
        assert any(isinstance(v, list) and v for out in one_run() for v in out.values())   # its export files
    before = rss_bytes()
    for _ in range(200):
        one_run()
    after = rss_bytes()
    print(f"RSS {before / 2**20:.0f} -> {after / 2**20:.0f} MiB over 200 Runs")
    assert after <= 1.10 * before


def test_a_heavy_run_ends_within_its_budget_plus_half_a_second(tmp_path):
    import time
    service = DecodeService(default_model="tiny", max_seconds=2)
    page = Page(service, {}, export_dir=ExportDir(str(tmp_path)), models=("tiny",))

    run = page_run(page, decoder="ar", gen_length=256, stop_at_eos=False, use_cache=False)
    t0 = time.perf_counter()
    outs = run()
    took = time.perf_counter() - t0
    trace = final(outs, Trace)                        # the run shown once it ends
    print(f"heavy run: {took:.2f} s at a 2 s budget, {len(trace.records)} forwards")
    assert took <= 2 + 0.5 and "time budget" in trace.meta.limit and len(trace.records) < 256
