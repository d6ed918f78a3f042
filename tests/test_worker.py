"""explorer.page.worker.follow: newest values only, a wall-time budget, and cancellation that waits for the work."""

import asyncio
import time

import pytest

from explorer.page.worker import follow


def slow_counter(state: dict, n: int = 400, pause: float = 0.01):
    def produce(should_stop):
        try:
            for i in range(n):
                time.sleep(pause)                  # a "forward"
                state["produced"] = i + 1
                yield i
        finally:
            state["stopped_at"] = time.monotonic()
    return produce


async def collect(agen) -> list:
    return [f async for f in agen]


def test_frames_are_dropped_and_the_last_value_is_final():
    state = {}
    frames = asyncio.run(collect(follow(slow_counter(state, n=60), None, interval=0.1)))
    assert frames[-1].final and frames[-1].value == 59 and frames[-1].limit is None
    assert len(frames) < 20                        # 60 values, about one frame per 0.1 s
    assert all(not f.final for f in frames[:-1])


def test_the_wall_budget_stops_the_worker_and_flags_the_last_value():
    state = {}
    frames = asyncio.run(collect(follow(slow_counter(state), 0.3, interval=0.05)))
    assert frames[-1].final and "time budget of 0.3 s" in frames[-1].limit
    # the worker was stopped (its generator closed) long before its 400 values, not left running
    assert "stopped_at" in state and state["produced"] < 100


def test_a_cancelled_request_ends_only_after_its_worker_stopped():
    state = {}

    async def main():
        task = asyncio.create_task(collect(follow(slow_counter(state), None, interval=0.05)))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic()

    ended = asyncio.run(main())
    assert state["stopped_at"] <= ended            # the work had stopped when the request ended
    produced = state["produced"]
    time.sleep(0.1)
    assert state["produced"] == produced and produced < 100


def test_closing_the_generator_stops_the_worker():
    state = {}

    async def main():
        agen = follow(slow_counter(state), None, interval=0.05)
        await agen.__anext__()
        await agen.aclose()                        # what gradio does when a client goes away
        return time.monotonic()

    ended = asyncio.run(main())
    assert state["stopped_at"] <= ended


def test_errors_reach_the_request():
    def produce(should_stop):
        yield 1
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        asyncio.run(collect(follow(produce, None, interval=0.01)))
