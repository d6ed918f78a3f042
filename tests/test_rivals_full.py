"""Prophet and KLASS on a full-attention model, where every forward scores the whole canvas, as their released
code runs them on LLaDA and Dream (pixeli99/Prophet ``generate_earlyexit``; shkim0116/KLASS
``stable_confident_decode``): Prophet's exit forward fills every [MASK] left, KLASS's KL history runs across
blocks. The block-causal behaviour beside it is tests/test_rivals.py's. Scripted logits as there: a slot's candidate
has log c, each of the other 49 ids log((1 − c)/49)."""

import numpy as np

from engine.decoders import build_decoder
from engine.records.trace import Reason
from engine.runtime.branch import canvas_after
from engine.runtime.loop import Generation
from explorer.grid import Grid
from tests.conftest import ScriptedAdapter
from tests.test_rivals import PROMPT, commits

P = len(PROMPT)


class FullScripted(ScriptedAdapter):
    """A full-attention stand-in: the script gives (candidate, confidence) for every generated slot, and a forward
    returns a row for each position of the canvas."""
    attention = "full"

    def offers(self):
        return frozenset({"full", "mask_slots", "no_shift"})

    def forward(self, ids, mask, pos, cache=None):
        out = super().forward(ids, mask, pos, cache)                         # the script's rows last
        assert len(ids) == P + 16 and cache is None, "every forward runs the whole canvas, uncached"
        return out


def run(script, kind=FullScripted, **kw):
    cfg = dict(block_size=8, gen_length=16, use_cache=False, stop_at_eos=False)
    return Generation(kind(script), PROMPT, build_decoder(**cfg, **kw)).run()


def every_slot(conf):
    return lambda t: [(20 + k, conf(t)) for k in range(16)]


def test_prophet_exit_on_a_full_attention_model_fills_the_whole_canvas_in_that_forward():
    # gap 3.89 (c 0.5) for two forwards, then 6.09 (c 0.9): the exit at forward 6 (mid bar 5.0), as in the
    # block-causal test, but its candidates after the block fill block 2 too: 6 forwards, not 7
    tr = run(every_slot(lambda t: 0.5 if t < 2 else 0.9), name="prophet")
    assert [len(s) for s in commits(tr)] == [1, 1, 1, 1, 1, 3] and tr.meta.nfe == 6
    assert tr.meta.token_ids == list(range(20, 36))
    last = tr.records[-1]
    assert last.field("fill_positions").tolist() == list(range(P + 8, P + 16))
    assert last.field("fill_to").tolist() == list(range(28, 36)) and last.field("fill_reason") == Reason.PROPHET_EXIT
    g = Grid.of(tr)
    assert g.committed[5, 8:].all() and (g.reason[5, 8:] == Reason.PROPHET_EXIT).all()
    assert (g.tokens[5] == np.arange(20, 36)).all()
    assert canvas_after(tr, 6)[P:] == list(range(20, 36))           # a branch after the exit starts from it
    assert [len(s) for s in commits(run(every_slot(lambda t: 0.5 if t < 2 else 0.9), kind=ScriptedAdapter,
                                        name="prophet"))] == [1, 1, 1, 1, 1, 3, 8]   # block-causal: one more


def test_prophet_exit_draws_the_later_slots_with_the_decodes_generator():
    a, b = (run(every_slot(lambda t: 0.6), name="prophet", gap_scale=0.0, temperature=1.0, seed=s) for s in (4, 4))
    assert a.meta.token_ids == b.meta.token_ids and a.meta.nfe == 1      # the first forward exits, fills all


def test_klass_history_runs_across_blocks_on_a_full_attention_model():
    # a constant distribution (c 0.95 everywhere): block 1 is stable at its third forward (no KL at the first);
    # block 2's slots were scored by block 1's forwards, so they are stable at the block's second forward (the
    # reference's gate: not before forward H of a block); block-causal: they are first scored in block 2
    steady = every_slot(lambda t: 0.95)
    per_block = [[int(r.committed.sum()) for r in run(steady, kind=k, name="klass", steps=8).records]
                 for k in (FullScripted, ScriptedAdapter)]
    assert per_block == [[1, 1, 6, 1, 7], [1, 1, 6, 1, 1, 6]]
    full = run(steady, name="klass", steps=8, kl_history=1)              # H = 1: the gate opens at forward 1
    assert [int(r.committed.sum()) for r in full.records] == [1, 7, 8]
    assert set(full.records[2].reason.tolist()) == {Reason.KL_STABLE}
    assert np.nanmax(full.records[2].field("kl")) == 0.0


def test_klass_kl_across_blocks_compares_with_the_forward_just_before():
    # block 2's candidates alternate at every forward until forward 5 (t = 4), then settle: at block 2's first
    # forwards their KL is large (the forward before scored another candidate), so the history needs two forwards
    # of the settled value (t = 5, 6) before the rest of the block is stable
    def script(t):
        return [(20 + k + (t % 2 if k >= 8 and t < 5 else 0), 0.95) for k in range(16)]
    tr = run(script, name="klass", steps=8)
    block2 = [r for r in tr.records if r.block == 1]
    assert all(np.nanmin(r.field("kl")) > 4 for r in block2[:2]) and np.nanmax(block2[2].field("kl")) == 0.0
    assert [int(r.committed.sum()) for r in block2] == [1, 1, 1, 5]
    assert set(block2[3].reason[block2[3].committed].tolist()) == {Reason.KL_STABLE}


def test_an_exit_fill_survives_the_trace_round_trip():
    from engine.records.trace import Trace
    tr = run(every_slot(lambda t: 0.6), name="prophet", gap_scale=0.0)
    back = Trace.from_bytes(tr.to_bytes())
    r, s = tr.records[0], back.records[0]
    assert s.field("fill_positions").tolist() == r.field("fill_positions").tolist() == list(range(P + 8, P + 16))
    assert s.field("fill_to").tolist() == r.field("fill_to").tolist() and s.field("fill_reason") == r.field("fill_reason")
    assert (Grid.of(back).tokens[-1] == Grid.of(tr).tokens[-1]).all()
