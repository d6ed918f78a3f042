"""The bench's rows as they become known, for the page's Sweep: every setting decodes the same problems in one
run (with ``batch`` > 1, one batched run in which the settings, queued one after another, share forwards), and the
rows so far are yielded each time a setting has finished all of its problems."""

from __future__ import annotations

from collections.abc import Iterator

from engine.harness.bench import Tally, chunk_events, warm_up, with_speedup
from engine.decoders import build_decoder, parse_spec
from engine.runtime.resources import cached_loader
from engine.tasks import get_task


def rows_of(task, problems: list, done: dict, adapter, asked: int) -> list[dict]:
    """Rows of the specs in ``done`` (spec -> [(trace, seconds)] of its first problems, in order)."""
    rows = []
    for spec, results in done.items():
        tally = Tally()
        for i, (prob, (tr, sec)) in enumerate(zip(problems, results)):
            tally.add(task, prob, i, [(spec, tr, sec)], adapter, None)
        rows += tally.rows([spec], asked, task.grader_name)
    return with_speedup(rows)


def bench_stream(adapter, task_name: str, n: int, specs: list[str], seed: int = 0, split: str = "test",
                 progress=None, should_stop=None, budget_s: float | None = None, load=None,
                 batch: int = 1, client: str = "") -> Iterator[list[dict]]:
    """``run_bench``'s rows on problems [0, n): the finished settings' rows (in the order asked) each time one more
    finishes; the last yield also holds the settings a stop left unfinished (each row counts its problems before
    the first unfinished one).
    ``progress(decodes done, decodes asked)``. Closing the generator aborts the decodes not yet ended: the engine
    loop drops them before its next round (``engine.runtime.jobs.Scheduler``)."""
    task = get_task(task_name)
    problems = task.problems(split, n, seed=seed)
    policies = [(spec, *parse_spec(spec)) for spec in specs]
    policies = [(spec, name, build_decoder(name, **params)) for spec, name, params in policies]
    load = load or cached_loader(adapter.device)
    if not warm_up(adapter, task_name, specs[0], seed, split, budget_s, should_stop, load):
        return
    got, shown = {spec: {} for spec, *_ in policies}, set()
    for spec, i, tr, sec in chunk_events(adapter, problems, 0, policies, seed, batch, budget_s, should_stop, load,
                                            client):
        if tr is None:                       # stopped: what finished before the first unfinished problem counts
            continue
        got[spec][i] = (tr, sec)
        if progress:
            progress(sum(map(len, got.values())), len(problems) * len(policies))
        if len(got[spec]) == len(problems):
            shown.add(spec)
            done = {s: [got[s][i] for i in range(len(problems))] for s in got if s in shown}
            yield rows_of(task, problems, done, adapter, n)
    if len(shown) < len(got):
        done = {s: [r[i] for i in range(first_gap(r, len(problems)))] for s, r in got.items()}
        if any(done.values()):
            yield rows_of(task, problems, {s: r for s, r in done.items() if r}, adapter, n)


def first_gap(results: dict, n: int) -> int:
    """How many of a setting's first problems finished without a gap."""
    return next((i for i in range(n) if i not in results), n)
