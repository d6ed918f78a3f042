"""The recorder (engine.record) against Unmask's own decodes: a loop written outside the engine, recorded, gives the
trace the engine's rule of the same settings gives: the canvas after every forward (exact), each slot's commit
forward (exact), the confidences the forwards scored (within 1e-5) and, for a re-masking loop, its revisions."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from engine.decoders import build_decoder
from engine.errors import UserError
from engine.models.model import load_model
from engine.record import Recorder
from engine.records.trace import Reason, Revision, Trace
from engine.runtime.loop import Generation
from engine.tasks import get_task
from explorer.grid import Grid
from tests.families import write_llada
from tests.on_device import OnDevice, widen
from tests.record_loops import remdm_cap, threshold_prefix
from tools.record_examples.llada_generate import block_causal_mask, generate

PROMPT = get_task("arith").problems("test", 1, seed=5)[0].prompt        # 28 tokens: a whole number of blocks


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny", device="cpu")


@pytest.fixture(scope="module")
def llada(tmp_path_factory):
    return load_model(str(write_llada(tmp_path_factory.mktemp("rec") / "llada")[0]), device="cpu")


def by_forward(tr: Trace) -> list[int]:
    """The index of the last record of each forward (a rule may record steps that reuse a forward)."""
    nfe = [r.nfe for r in tr.records]
    return [i for i in range(len(nfe)) if i + 1 == len(nfe) or nfe[i + 1] != nfe[i]]


def assert_same_decode(rec: Trace, own: Trace) -> None:
    """Canvas after each forward and commit forwards exact; every confidence the rule's forwards scored at a
    still-masked slot equal to the recorded one within 1e-5."""
    last = by_forward(own)
    assert rec.nfe == own.nfe == len(last)
    g, h = Grid.of(rec), Grid.of(own)
    assert g.P == h.P and rec.meta.gen_end == own.meta.gen_end
    assert np.array_equal(g.tokens[:, : h.end - h.P], h.tokens[last])
    commit_forward = np.array([own.records[s].nfe - 1 if s >= 0 else -1 for s in h.commit_step])
    assert np.array_equal(g.commit_step[: len(commit_forward)], commit_forward)
    seen = 0
    for r in own.records:
        k = r.nfe - 1
        at = {int(p): j for j, p in enumerate(rec.records[k].positions)}
        for j, p in enumerate(r.positions):
            if r.tokens_before[j] == own.meta.mask_token_id and p >= own.meta.prompt_len:
                assert abs(rec.records[k].confidence[at[int(p)]] - r.confidence[j]) < 1e-5, (k, p)
                assert rec.records[k].candidate[at[int(p)]] == r.candidate[j]
                seen += 1
    assert seen >= own.meta.generated_tokens
    assert rec.meta.token_ids == own.meta.token_ids and rec.meta.text == own.meta.text


@pytest.mark.parametrize("steps", [4, 2])
def test_llada_generate_recorded_is_unmasks_llada(tiny, steps):
    """LLaDA's generate.py style (whole-canvas forwards, low confidence remasking, blocks of 4) on the embedded
    model against ``llada`` of the same settings."""
    ids = tiny.encode_prompt(PROMPT)
    n, B, G = len(ids) + 16, 4, 16
    with Recorder(tiny.model, tiny.mask_token_id, len(ids), tiny.tokenizer, block_size=B, loop="generate",
                  args=dict(steps=steps * G // B, gen_length=G, block_length=B)) as rec:
        out = generate(tiny.model, torch.tensor([ids]), steps=steps * G // B, gen_length=G, block_length=B,
                       mask_id=tiny.mask_token_id, attention_mask=block_causal_mask(n, B, tiny.device))
        tr = rec.finish(out)
    own = Generation(tiny, PROMPT, build_decoder("llada", block_size=B, steps=steps, gen_length=G,
                                                 stop_at_eos=False)).run()
    assert_same_decode(tr, own)
    assert tr.meta.decoder == "recorded" and tr.meta.summary["recorded"]["loop"] == "generate"
    assert tr.meta.params["block_length"] == B and tr.meta.summary["recorded"]["closed"]
    assert {int(x) for r in tr.records for x in r.reason[r.committed]} == {int(Reason.SEEN)}
    back = Trace.from_bytes(tr.to_bytes())                     # a normal trace: saved and read back the same
    assert np.array_equal(Grid.of(back).tokens, Grid.of(tr).tokens) and back.meta.decoder == "recorded"


@pytest.mark.parametrize("tau", [0.9, 0.5])
def test_threshold_loop_with_prefix_cache_is_unmasks_threshold(llada, tau):
    """Fast-dLLM's prefix-cache loop (block calls against the cache, no position ids: offsets from the cache's
    length) on a full-attention model against ``threshold`` with ``kv_cache=prefix``."""
    ids = llada.encode_prompt(PROMPT)
    with Recorder(llada.model, llada.mask_token_id, len(ids), llada.tokenizer, block_size=4) as rec:
        tr = rec.finish(threshold_prefix(llada, ids, 12, 4, tau))
    own = Generation(llada, PROMPT, build_decoder("threshold", tau=tau, block_size=4, gen_length=12,
                                                  stop_at_eos=False, kv_cache="prefix")).run()
    assert_same_decode(tr, own)
    assert any(len(r.positions) < 12 for r in tr.records)      # the cached forwards' windows were read


def test_remasking_loop_gives_remdms_revisions(tiny):
    """A ReMDM sampler that re-masks: its revisions (token -> [MASK]) at the forwards ``remdm`` makes them."""
    ids, G, B, S, seed = tiny.encode_prompt(PROMPT), 16, 4, 4, 3
    with Recorder(tiny.model, tiny.mask_token_id, len(ids), tiny.tokenizer, block_size=B) as rec:
        tr = rec.finish(remdm_cap(tiny, ids, G, B, S, eta=0.4, seed=seed))
    own = Generation(tiny, PROMPT, build_decoder("remdm", block_size=B, steps=S, eta=0.4, remask="cap",
                                                 gen_length=G, stop_at_eos=False, seed=seed)).run()
    assert_same_decode(tr, own)
    theirs = {(own.records[s].nfe - 1, p, c, a, b) for s, p, c, a, b in own.revisions()}
    ours = set(tr.revisions())
    assert ours == theirs and theirs, (ours, theirs)
    assert {c for _, _, c, _, _ in ours} == {int(Revision.REMASK)}


def test_a_batch_records_the_row_asked_for(tiny):
    """Two prompts of one length decoded as a batch: row 1's trace is that prompt's decode alone."""
    other = get_task("arith").problems("test", 1, seed=7)[0].prompt
    rows = [tiny.encode_prompt(t) for t in (PROMPT, other)]
    assert len(rows[0]) == len(rows[1])
    P, G, B = len(rows[0]), 8, 4
    am = block_causal_mask(P + G, B, tiny.device)
    runs = []
    for batch, row in (([rows[1]], 0), (rows, 1)):
        with Recorder(tiny.model, tiny.mask_token_id, P, tiny.tokenizer, row=row, block_size=B) as rec:
            x = torch.tensor([r + [tiny.mask_token_id] * G for r in batch])
            for lo in range(P, P + G):                   # one token a forward, left to right, every row at once
                x[:, lo] = tiny.model(x, attention_mask=am.expand(len(batch), -1, -1, -1)).logits[:, lo].argmax(-1)
            runs.append(rec.finish(x))
    one, batched = runs
    assert np.array_equal(Grid.of(one).tokens, Grid.of(batched).tokens)
    assert one.meta.prompt_ids == rows[1] and batched.meta.prompt_ids == rows[1]
    np.testing.assert_allclose(np.concatenate([r.confidence for r in batched.records]),
                               np.concatenate([r.confidence for r in one.records]), atol=1e-5)


def test_guidance_records_the_conditional_half(tiny):
    """LLaDA's classifier-free guidance doubles the batch (the prompt masked in the second half): the recorder
    finds it and reads the conditional rows."""
    ids, G, B = tiny.encode_prompt(PROMPT), 8, 4
    n = len(ids) + G
    with Recorder(tiny.model, tiny.mask_token_id, len(ids), tiny.tokenizer, block_size=B) as rec:
        out = generate(tiny.model, torch.tensor([ids]), steps=8, gen_length=G, block_length=B, cfg_scale=1.0,
                       mask_id=tiny.mask_token_id, attention_mask=block_causal_mask(n, B, tiny.device))
        tr = rec.finish(out)
    assert tr.meta.summary["recorded"]["guidance"] and tr.meta.prompt_ids == ids
    assert Grid.of(tr).tokens[-1].tolist() == out[0, len(ids):].tolist()
    x = torch.tensor([ids + [tiny.mask_token_id] * G])        # the first forward's conditional row, alone
    with torch.no_grad():
        first = tiny.model(x, attention_mask=block_causal_mask(n, B, tiny.device)).logits[0, len(ids):].double()
    first[:, tiny.mask_token_id] = float("-inf")
    assert tr.records[0].positions.tolist() == list(range(len(ids), len(ids) + B))     # the first block's slots
    np.testing.assert_allclose(tr.records[0].confidence, torch.softmax(first, -1).max(-1).values[:B].float(),
                               atol=1e-5)


class Plain(torch.nn.Module):
    """A model whose output is whatever it is told to return."""

    def __init__(self, out=None):
        super().__init__()
        self.out = out

    def forward(self, ids, **kw):
        return self.out(ids) if self.out is not None else torch.zeros(*ids.shape, 7)


def test_a_block_size_keeps_the_blocks_slots_and_every_change():
    """With the loop's block size, a whole-canvas forward's record holds the B slots from the first [MASK] on
    (what Unmask's own decoders record) and every slot that changed; without one, every generated slot."""
    for B, kept in ((None, [[1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6]]), (2, [[1, 2], [2, 3, 6]])):
        m = Plain()
        with Recorder(m, mask_id=3, prompt_len=1, block_size=B) as rec:
            m(torch.tensor([[1, 3, 3, 3, 3, 3, 3]]))
            m(torch.tensor([[1, 7, 3, 3, 3, 3, 3]]))                    # 1 <- 7
            tr = rec.finish(torch.tensor([1, 7, 3, 8, 3, 3, 9]))        # 3 <- 8 and 6 <- 9 (a loop's odd writes)
        assert [r.positions.tolist() for r in tr.records] == kept
        assert Grid.of(tr).tokens[-1].tolist() == [7, 3, 8, 3, 3, 9]


def test_block_calls_read_their_positions_and_writes_outside_them_are_kept():
    """Dual-cache style: each block's first call runs the whole canvas, its later calls the block alone at the
    positions their position_ids name; a write the next call shows outside the block the forward scored is kept
    as that forward's fill."""
    m = Plain()
    with Recorder(m, mask_id=3, prompt_len=1) as rec:
        m(torch.tensor([[1, 3, 3, 3, 3]]))
        m(torch.tensor([[7, 3]]), position_ids=torch.tensor([[1, 2]]))                  # 1 <- 7 by forward 0
        m(torch.tensor([[1, 7, 8, 3, 9]]))                                              # 2 <- 8, 4 <- 9 by 1
        m(torch.tensor([[3, 9]]), position_ids=torch.tensor([[3, 4]]))                  # nothing by 2
        tr = rec.finish(torch.tensor([[1, 7, 8, 9, 9]]))                                # 3 <- 9 by 3
    assert [r.positions.tolist() for r in tr.records] == [[1, 2, 3, 4], [1, 2], [1, 2, 3, 4], [3, 4]]
    assert [r.positions[r.committed].tolist() for r in tr.records] == [[1], [2], [], [3]]
    assert tr.records[1].fill.fill_positions.tolist() == [4] and tr.records[1].fill.fill_to.tolist() == [9]
    assert Grid.of(tr).tokens.tolist() == [[7, 3, 3, 3], [7, 8, 3, 9], [7, 8, 3, 9], [7, 8, 9, 9]]
    assert Grid.of(tr).commit_step.tolist() == [0, 1, 3, 1]


@pytest.mark.parametrize("model,call,message", [
    (Plain(), lambda m: m(torch.tensor([[1, 2, 5, 5]])), "holds no \\[MASK\\]"),
    (Plain(lambda ids: {"hidden": ids}), lambda m: m(torch.tensor([[1, 3, 3]])), "no logits"),
    (Plain(lambda ids: torch.zeros(1, 2, 7)), lambda m: m(torch.tensor([[1, 3, 3]])), "do not line up"),
    (Plain(), lambda m: m(inputs_embeds=torch.zeros(1, 3, 4)), "input_ids"),
    (Plain(), lambda m: (m(torch.tensor([[1, 3, 3]])), m(torch.tensor([[1, 3, 3, 3, 3]]))), "past the canvas"),
    (Plain(), lambda m: (m(torch.tensor([[1, 3, 3]])), m(torch.tensor([[1, 3, 3], [1, 3, 3]]))), "batch changed"),
    (Plain(), lambda m: (m(torch.tensor([[1, 3, 3]])), m(torch.tensor([[2, 3, 3]]))), "second decode"),
    (Plain(), lambda m: m(torch.tensor([[1, 3, 3]]), position_ids=torch.tensor([[0, 1]])), "position_ids"),
], ids=["no-mask", "no-logits", "rows", "embeds", "longer", "batch", "new-prompt", "positions"])
def test_what_it_cannot_read_is_refused_in_one_line(model, call, message):
    with Recorder(model, mask_id=3, prompt_len=1):
        with pytest.raises(UserError, match=message) as e:
            call(model)
    assert "\n" not in str(e.value)


def test_bad_arguments_and_empty_recordings_are_refused():
    with pytest.raises(UserError, match="mask_id"):
        Recorder(Plain(), mask_id=-1)
    with pytest.raises(UserError, match="nn.Module"):
        Recorder(object(), mask_id=3)
    with Recorder(Plain(), mask_id=3) as rec:
        pass
    with pytest.raises(UserError, match="no forward"):
        rec.finish(None)
    with Recorder(Plain(), mask_id=3) as rec:
        rec.model(torch.tensor([[1, 3, 3]]))
        with pytest.raises(UserError, match="returned 5 tokens"):
            rec.finish(torch.tensor([[1, 2, 3, 4, 5]]))
        with pytest.raises(UserError, match="not token ids"):
            rec.finish("the answer")


class Widened(torch.nn.Module):
    """The embedded model with its output layer widened to ``width`` tokens, its logits "on the device"
    (``tests.on_device``): what the recorder reads back shows as counted copies."""

    def __init__(self, inner, width: int):
        super().__init__()
        self.inner, self.width, self.device = inner, width, inner.device

    def forward(self, input_ids, **kw):
        with torch.no_grad():
            logits = self.inner(input_ids, **kw).logits
        return SimpleNamespace(logits=widen(logits, self.width).as_subclass(OnDevice))


@pytest.mark.parametrize("cfg_scale", [0.0, 1.0])
def test_what_the_recorder_reads_back_does_not_grow_with_the_vocabulary(tiny, cfg_scale):
    """Bytes the recorder adds per forward (recorded loop minus the same loop unrecorded), at V = 1 000 and
    126 464 (LLaDA's): a few numbers per scored row, never a row of the vocabulary."""
    ids, G, B = tiny.encode_prompt(PROMPT), 8, 4
    am = block_causal_mask(len(ids) + G, B, tiny.device)
    per = {}
    for width in (1000, 126_464):
        model, counted = Widened(tiny.model, width), []
        for recorded in (False, True):
            OnDevice.reset()
            rec = Recorder(model, tiny.mask_token_id, len(ids), block_size=B)
            if recorded:
                rec.attach()
            generate(model, torch.tensor([ids]), steps=8, gen_length=G, block_length=B, cfg_scale=cfg_scale,
                     mask_id=tiny.mask_token_id, attention_mask=am)
            rec.detach()
            counted.append(OnDevice.bytes())
        assert rec.timeline is not None and len(rec.timeline.records) == 7      # the 8th closes at finish
        per[width] = (counted[1] - counted[0]) / 8
    narrow, wide = per[1000], per[126_464]
    assert 0 < wide <= narrow * 1.05 + 64, per
    assert wide < 4096, per                     # G rows of 14 float64: a 126 464-wide fp32 row alone is 506 KB
