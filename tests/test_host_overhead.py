"""The host-overhead benchmark's plumbing (tools.experiments.host_overhead): its parts add up, batching shares
rounds, and the real model is called the same way by both loops. Its figures are in docs/results.md."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from engine.models.model import load_model
from engine.runtime.jobs import configure, engine_loop
from tools.experiments import host_overhead as ho


@pytest.fixture(scope="module")
def real():
    return load_model("unmask-tasks-small", device="cpu")


def test_rows_add_up_and_a_batch_shares_its_rounds(real, monkeypatch):
    """Batch 12 shares rounds even when the process loop was left at one decode a round (a CLI run in this
    process, ``--batch 1``, leaves it so): the benchmark sets the running set to its batch, and restores it."""
    monkeypatch.setattr(ho, "GEN", 16)
    configure(max_running=1)                               # conftest restores the loop's limits after the test
    out = ho.rows(real, 500, 8, 2, refs={})
    assert engine_loop().max_running == 1
    assert [(r["loop"], r["batch"]) for r in out] == [("Unmask llada", 1), ("Unmask llada", 12),
                                                      ("Unmask threshold", 1), ("Unmask threshold", 12)]
    for r in out:
        assert r["model_ms"] + r["stats_ms"] + r["rest_ms"] == pytest.approx(r["total_ms"])
        assert r["stats_ms"] > 0 and r["rest_ms"] > 0
    assert out[1]["rounds"] < out[0]["rounds"] and out[3]["rounds"] < out[2]["rounds"]     # two decodes per round
    assert "| Unmask llada | stand-in | 500 | 8 | 12 |" in ho.table(out)


def test_the_released_loops_call_the_real_model_as_unmask_runs_it(real):
    """``Canvas``: model(x).logits over the whole canvas with full attention, bit for bit Unmask's forward."""
    full = dataclasses.replace(real, attention="full", block_size=None)
    ids = torch.tensor([full.encode_prompt("1 + 2 = ?") + [full.mask_token_id] * 8])
    n = ids.shape[1]
    got = ho.Canvas(full)(ids).logits[0]
    assert torch.equal(got, full.forward(ids[0], torch.ones(n, n, dtype=torch.bool), torch.arange(n)))
    timed = ho.Timed(torch.nn.Linear(2, 2))
    timed.model(torch.zeros(1, 2))
    assert timed.calls == 1 and timed.seconds > 0


def test_the_forward_beside_the_host_runs_at_toy_width_on_the_cpu():
    """``--forward``'s timing at toy width: one row per (batch, rows), its parameters counted, no kernel time off a
    GPU (torch's profiler reads CUDA kernels only)."""
    shape = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                 intermediate_size=64, vocab_size=100)
    out = ho.forward_rows("cpu", reps=1, shape=shape)
    assert [(r["batch"], r["rows"]) for r in out] == [(1, 32), (1, 128), (12, 32), (12, 128)]
    assert all(r["ms"] > 0 and r["busy_ms"] is None and r["params"] > 100 * 32 for r in out)
