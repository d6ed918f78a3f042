"""A sweep of many settings on one task, cut into (setting, problem range) shards, run here or on a Ray cluster.

    python -m tools.experiments sweep --settings sweep.txt --task arith --n 200 [--batch 8] [--ray auto|ADDRESS]

``--settings``: one decoder SPEC per line (``#`` starts a comment). Each shard is a batched bench
(``engine.harness.bench.bench_tally``) of one setting on a range of problems. Problem i keeps its seed wherever it runs,
and shards merge in order, so the merged rows equal the local run of the same sweep (timing columns aside). With
``--ray`` every shard is a Ray task on one CPU (a GPU with ``--gpus-per-shard``); a worker process loads the model
once and keeps it for every shard it runs. Ray is optional (``pip install -r requirements-ray.txt``).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from engine.harness.bench import Tally, bench_tally, format_table, with_speedup
from engine.decoders import build_decoder, parse_spec
from engine.errors import ConfigError


def read_settings(path: str) -> list[str]:
    """SPEC lines of a settings file, each checked against the catalogue before any work."""
    try:
        lines = Path(path).read_text().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"--settings {path}: {e}") from None
    specs = [ln.split("#", 1)[0].strip() for ln in lines]
    specs = [s for s in specs if s]
    if not specs:
        raise ConfigError(f"--settings {path}: no settings")
    for spec in specs:
        name, params = parse_spec(spec)
        build_decoder(name, **params)
    return specs


def shards(specs: list[str], n: int, size: int) -> list[tuple[str, int, int]]:
    return [(spec, lo, min(lo + size, n)) for spec in specs for lo in range(0, n, size)]


@lru_cache(maxsize=2)
def _model(name: str):
    """The model of this process, loaded once (a Ray worker keeps it for every shard it runs)."""
    from engine.models.model import load_model
    return load_model(name)


def run_shard(model: str, task: str, spec: str, lo: int, hi: int, seed: int, batch: int, threads: int) -> dict:
    """One shard's counts, as JSON (what a Ray task returns)."""
    import torch
    torch.set_num_threads(threads)
    return bench_tally(_model(model), task, [spec], lo, hi, seed=seed, batch=batch).to_json()


def merge(specs: list[str], parts: list[tuple[str, dict]], n: int, task: str) -> list[dict]:
    """Rows from the shards' counts, merged per setting in shard order, with the task's grader named."""
    from engine.tasks import get_task
    rows = []
    for spec in specs:
        tally = Tally()
        for s, part in parts:
            if s == spec:
                tally.merge(Tally.from_json(part))
        rows += tally.rows([spec], n, get_task(task).grader_name)
    return with_speedup(rows)


def sweep(model: str, task: str, n: int, specs: list[str], shard: int = 50, batch: int = 8, seed: int = 0,
          ray_address: str | None = None, gpus_per_shard: float = 0.0, threads: int = 1) -> list[dict]:
    from engine.tasks import get_task, with_task_length
    specs = [with_task_length(s, get_task(task)) for s in specs]    # a data task's card: its generation length
    jobs = shards(specs, n, shard)
    if ray_address is None:
        parts = [(spec, run_shard(model, task, spec, lo, hi, seed, batch, threads)) for spec, lo, hi in jobs]
        return merge(specs, parts, n, task)
    import ray
    if not ray.is_initialized():
        ray.init(address=ray_address)
    remote = ray.remote(num_cpus=threads, num_gpus=gpus_per_shard)(run_shard)
    futures = [remote.remote(model, task, spec, lo, hi, seed, batch, threads) for spec, lo, hi in jobs]
    return merge(specs, list(zip([j[0] for j in jobs], ray.get(futures))), n, task)


def main(args) -> None:
    if not args.settings:
        raise SystemExit("sweep needs --settings FILE")
    specs = read_settings(args.settings)
    rows = sweep(args.model, args.task, args.n, specs, args.shard, args.batch, ray_address=args.ray or None,
                 gpus_per_shard=args.gpus_per_shard, threads=args.threads)
    print(format_table(rows))
    out = Path(args.out) / "sweep.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(dict(task=args.task, n=args.n, model=args.model, ray=args.ray or None, rows=rows),
                              indent=1, default=str))
    print(f"saved {out}")
