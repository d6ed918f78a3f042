"""The sharded sweep (tools.experiments.sweep): merged shards equal one local bench; on Ray when it is installed."""

from __future__ import annotations

import pytest

from engine.harness.bench import run_bench
from tools.experiments import sweep
from engine.models.model import load_model

SPECS = ["threshold:tau=0.5,block_size=4", "ar"]
TIMING = ("wall_s", "tokens_per_s", "speedup")


def untimed(rows):
    return [{k: v for k, v in r.items() if k not in TIMING} for r in rows]


def test_shards_merge_to_the_local_bench(sdar_dir):
    rows = sweep.sweep(str(sdar_dir), "arith", 7, SPECS, shard=3, batch=2)
    one = [run_bench(load_model(str(sdar_dir)), "arith", 7, [spec], warmup=False)[0] for spec in SPECS]
    assert untimed(rows) == untimed(one)
    assert rows[0]["n"] == 7 and rows[0]["n_prompts"] == 7


def test_settings_file_is_checked_before_any_work(tmp_path):
    from engine.errors import ConfigError
    f = tmp_path / "s.txt"
    f.write_text("threshold:tau=0.9  # fine\n\nthreshold:tau=7\n")
    with pytest.raises(ConfigError, match="tau"):
        sweep.read_settings(str(f))


@pytest.mark.ray
def test_ray_sweep_equals_the_local_one(sdar_dir):
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        remote = sweep.sweep(str(sdar_dir), "arith", 7, SPECS, shard=3, batch=2, ray_address="auto")
    finally:
        ray.shutdown()
    local = sweep.sweep(str(sdar_dir), "arith", 7, SPECS, shard=3, batch=2)
    assert untimed(remote) == untimed(local)
