"""Decoder rules on synthetic logits: no model, every rule checked by what it commits."""

import numpy as np
import pytest
import torch

from engine.decoders import build_decoder, parse_spec
from engine.decoders.schedule import transfer_schedule
from engine.decoders.threshold.policy import dynamic_commit, threshold_commit
from engine.runtime.loop import ConfigError, Generation
from engine.models import memory
from engine.runtime import sampling
from engine.runtime.sampling import make_generator, token_stats, token_stats_batch
from engine.records.trace import Reason


def test_threshold_tau_one_commits_exactly_the_argmax():
    conf = torch.tensor([0.3, 0.95, 0.7, 0.99])
    masked = torch.tensor([True, True, True, False])
    idx, forced = threshold_commit(conf, masked, 1.0)
    assert idx.tolist() == [1] and forced.tolist() == [True]


def test_threshold_commits_argmax_and_everything_above_tau():
    conf = torch.tensor([0.91, 0.2, 0.95, 0.5])
    idx, forced = threshold_commit(conf, torch.ones(4, dtype=torch.bool), 0.9)
    assert idx.tolist() == [0, 2] and not forced.any()
    idx, forced = threshold_commit(torch.tensor([0.1, 0.4, 0.3]), torch.ones(3, dtype=torch.bool), 0.9)
    assert idx.tolist() == [1] and forced.all()


def test_dynamic_rule_uses_quota():
    conf = torch.tensor([0.95, 0.2, 0.96, 0.5])
    m = torch.ones(4, dtype=torch.bool)
    assert dynamic_commit(conf, m, 0.9, 2).tolist() == [0, 2]
    assert dynamic_commit(conf, m, 0.9, 3).tolist() == [0, 2, 3]
    assert dynamic_commit(conf, m, 0.99, 1).tolist() == [2]


def test_transfer_schedule():
    assert transfer_schedule(8, 3) == [3, 3, 2]
    assert transfer_schedule(3, 8) == [1, 1, 1]
    assert sum(transfer_schedule(13, 4)) == 13


def test_token_stats_greedy_and_sampled():
    logits = torch.tensor([[4.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    st = token_stats(logits)
    assert st.candidate.tolist() == [0, 0]
    p = torch.softmax(logits[0].double(), -1)
    assert st.confidence[0] == pytest.approx(float(p[0]), abs=1e-6)
    assert st.margin[0] == pytest.approx(float(p[0] - p[1]), abs=1e-6)
    assert st.entropy[1] == pytest.approx(1.0, abs=1e-6)
    # Gumbel-max at T=1 samples from softmax(logits): frequencies match
    g = make_generator(0)
    rows = torch.tensor([[1.0, 0.0, -1.0]]).repeat(20000, 1)
    freq = np.bincount(token_stats(rows, temperature=1.0, generator=g).candidate.numpy(), minlength=3) / 20000
    assert np.allclose(freq, torch.softmax(rows[0], -1).numpy(), atol=0.015)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_round_in_chunks_gives_each_decode_what_it_gets_alone(monkeypatch, temperature):
    """token_stats_batch splits a large round into chunks of whole decodes, and a decode past the chunk into
    pieces of rows (bounded temporaries): every field of every decode is bit for bit what that decode's rows give
    alone, Gumbel draws included."""
    g = torch.Generator().manual_seed(0)
    parts = [torch.randn(n, 50, generator=g) * 3 for n in (3, 7, 1, 12, 2)]          # (q_i, V)
    alone = [token_stats_batch([p], temperature, 0, 1.0, [make_generator(i)], mask_id=4)[0]
             for i, p in enumerate(parts)]
    for chunk in (50, 7 * 50, 10 * 50, 1 << 23):          # smaller than one part, one part, a few, all at once
        monkeypatch.setattr(memory, "CHUNK", chunk)
        got = token_stats_batch(parts, temperature, 0, 1.0, [make_generator(i) for i in range(len(parts))], 4)
        for a, b in zip(alone, got, strict=True):
            for f in ("candidate", "confidence", "margin", "entropy", "probs", "top1", "top_ids", "top_p"):
                assert torch.equal(getattr(a, f), getattr(b, f)), (chunk, f)
            assert not (b.candidate == 4).any()


def test_spec_parsing_and_validation():
    assert parse_spec("threshold:tau=0.9,block_size=8") == ("threshold", {"tau": "0.9", "block_size": "8"})
    pol = build_decoder("threshold", tau="0.8", block_size="4")
    assert pol.cfg.tau == 0.8 and pol.cfg.block_size == 4
    for bad in (dict(tau=0.0), dict(tau=1.5), dict(block_size=0), dict(block_size=65), dict(rule="x"),
                dict(nope=1), dict(tau="abc")):
        with pytest.raises(ConfigError):
            build_decoder("threshold", **bad)
    with pytest.raises(ConfigError):
        build_decoder("nope")
    with pytest.raises(ConfigError):
        build_decoder("ar", block_size=4)


def test_decoders_on_model_commit_progress_and_reasons(adapter):
    prompt = "Eva has 20 pens . She sells 4 pens . How many pens does she have now ?"
    for name, kw in [("ar", {}), ("threshold", dict(tau=1.0, block_size=4)), ("llada", dict(block_size=8, steps=4))]:
        tr = Generation(adapter, prompt, build_decoder(name, gen_length=16, stop_at_eos=False, **kw)).run()
        assert all(r.n_committed >= 1 for r in tr.records)
        assert tr.meta.generated_tokens == 16 or tr.meta.token_ids[-1] in adapter.stop_ids
        if name == "ar":
            assert all(r.n_committed == 1 for r in tr.records) and tr.nfe == 16
        if name == "threshold":  # tau = 1: one token per step unless a probability is exactly 1.0
            assert all(r.n_committed == 1 or (r.confidence[r.committed] >= 1.0).sum() >= 1 for r in tr.records)
        if name == "llada":
            assert tr.nfe == 2 * 4  # 16 masks in 2 blocks of 8 (prompt tail aside), 4 steps each
            codes = {int(c) for r in tr.records for c in r.reason if c}
            assert codes == {Reason.SCHEDULE}


def test_same_seed_same_trace(adapter):
    prompt = "Leo has 30 cards . He gives away 9 cards . How many cards does he have now ?"
    pol = lambda seed: build_decoder("threshold", tau=0.7, block_size=4, temperature=1.0, seed=seed, gen_length=20)
    a, b, c = (Generation(adapter, prompt, pol(s)).run() for s in (7, 7, 8))
    assert a.meta.final_tokens == b.meta.final_tokens
    assert all(np.array_equal(x.candidate, y.candidate) for x, y in zip(a.records, b.records))
    assert a.meta.final_tokens != c.meta.final_tokens


def test_a_round_is_one_chunk_off_the_cpu_and_bounded_on_it():
    """On the CPU a round's statistics run in chunks of at most CHUNK elements (freed temporaries reused); on an
    accelerator every launch is host time, so twelve decodes of 32 rows at LLaDA's vocabulary are one chunk."""
    sizes = [32 * 126_464] * 12
    assert sampling.chunk_groups(sizes, torch.device("cuda")) == [list(range(12))]
    on_cpu = sampling.chunk_groups(sizes, torch.device("cpu"))
    assert [i for g in on_cpu for i in g] == list(range(12)) and len(on_cpu) == 12      # one decode each
    assert sampling.chunk_groups([10, 10, 10], torch.device("cpu")) == [[0, 1, 2]]
    big = memory.DEVICE_CHUNK
    assert sampling.chunk_groups([big, 1, big + 1], torch.device("cuda")) == [[0], [1], [2]]


def test_one_decode_past_the_chunk_runs_by_rows(monkeypatch):
    """A decode whose rows alone pass the chunk (a whole-canvas forward's) is scored in pieces of rows: no call of
    the statistics holds more than the chunk's elements, so a round's float64 temporaries are bounded."""
    seen, stats = [], sampling._stats
    monkeypatch.setattr(sampling, "_stats", lambda parts, *a: seen.append(sum(p.numel() for p in parts)) or
                        stats(parts, *a))
    monkeypatch.setattr(memory, "CHUNK", 4 * 1000)
    token_stats_batch([torch.randn(10, 1000), torch.randn(3, 1000)], 1.0, 0, 1.0,
                      [make_generator(1), make_generator(2)], 4)
    assert max(seen) <= 4 * 1000 and sum(seen) == 13 * 1000
