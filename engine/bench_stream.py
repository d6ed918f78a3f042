"""The bench's rows as they become known, for the page's Sweep: every setting decodes the same problems in one
run (with ``batch`` > 1, one batched run in which the settings, queued one after another, share forwards), and the
rows so far are yielded each time a setting has finished all of its problems."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

from engine.bench import Tally, decode_chunk, warm_up, with_speedup
from engine.decoders import build_decoder, parse_spec
from engine.resources import cached_loader
from engine.tasks import get_task


def rows_of(task, problems: list, done: dict, adapter, asked: int) -> list[dict]:
    """Rows of the specs in ``done`` (spec -> [(trace, seconds)] of its first problems, in order)."""
    rows = []
    for spec, results in done.items():
        tally = Tally()
        for i, (prob, (tr, sec)) in enumerate(zip(problems, results)):
            tally.add(task, prob, i, [(spec, tr, sec)], adapter, None)
        rows += tally.rows([spec], asked)
    return with_speedup(rows)


def bench_stream(adapter, task_name: str, n: int, specs: list[str], seed: int = 0, split: str = "test",
                 progress=None, should_stop=None, budget_s: float | None = None, load=None,
                 batch: int = 1) -> Iterator[list[dict]]:
    """``run_bench``'s rows on problems [0, n): the finished settings' rows (in the order asked) each time one more
    finishes; the last yield also holds the settings a stop left unfinished (each row counts its problems before
    the first unfinished one).
    ``progress(decodes done, decodes asked)``. Closing the generator stops the decodes at their next forward."""
    task = get_task(task_name)
    problems = task.problems(split, n, seed=seed)
    policies = [(spec, *parse_spec(spec)) for spec in specs]
    policies = [(spec, name, build_decoder(name, **params)) for spec, name, params in policies]
    load = load or cached_loader(adapter.device)
    events, closed = queue.Queue(), threading.Event()
    stop = lambda: closed.is_set() or bool(should_stop and should_stop())       # noqa: E731

    def work():
        try:
            if warm_up(adapter, task_name, specs[0], seed, split, budget_s, stop, load):
                events.put(("end", decode_chunk(adapter, problems, 0, policies, seed, batch, budget_s, stop, load,
                                                lambda *done: events.put(("done", done)))))
            else:
                events.put(("end", {}))
        except BaseException as e:           # the consumer's thread raises it
            events.put(("error", e))

    threading.Thread(target=work, daemon=True).start()
    got, shown = {spec: {} for spec, *_ in policies}, set()
    try:
        while True:
            kind, value = events.get()
            if kind == "error":
                raise value
            if kind == "end":
                if len(shown) < len(got) and any(value.values()):
                    yield rows_of(task, problems, {s: r for s, r in value.items() if r}, adapter, n)
                return
            spec, i, tr, sec = value
            got[spec][i] = (tr, sec)
            if progress:
                progress(sum(map(len, got.values())), len(problems) * len(policies))
            if len(got[spec]) == len(problems):
                shown.add(spec)
                done = {s: [got[s][i] for i in range(len(problems))] for s in got if s in shown}
                yield rows_of(task, problems, done, adapter, n)
    finally:
        closed.set()
