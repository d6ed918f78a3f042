"""What a run decided, for its "tokens" and TPF tiles (``Runner.generated``): a partial run (stopped, or ended by a
limit) counts the slots it decided up to and including its first stop token, never a slot still masked before that
stop, nor one decided after it; TPF is those tokens over its forwards. Scripted logits, no model."""

import pytest

from engine.decoders import build_decoder
from engine.errors import BudgetExceeded
from engine.runtime.loop import Generation
from tests.conftest import ScriptedAdapter

PROMPT = [1, 10, 11, 12, 13, 14, 15, 16]           # 8 tokens: the first block of 8 after it is fully masked
STOP, MASK = ScriptedAdapter.stop_ids[0], ScriptedAdapter.mask_token_id


def script(first: dict):
    """Call 0: {slot: (token, confidence)} for the slots named, 0.3 for the others; later calls: all sure."""
    def rows(t):
        return [first.get(k, (30 + k, 0.3)) if t == 0 else (first.get(k, (30 + k, 0.99))[0], 0.99)
                for k in range(8)]
    return rows


def stopped_after(first: dict, forwards: int):
    """The partial trace of a threshold run (τ 0.9, B 8, 16 slots) the visitor stopped after ``forwards``."""
    gen = Generation(ScriptedAdapter(script(first)), PROMPT,
                     build_decoder("threshold", tau=0.9, block_size=8, gen_length=16, use_cache=False,
                                   stop_at_eos=True),
                     should_stop=lambda: len(gen.records) >= forwards)
    with pytest.raises(BudgetExceeded) as e:
        gen.run()
    return e.value.partial


def test_a_stopped_run_counts_the_slots_it_decided():
    tr = stopped_after({0: (20, 0.95), 5: (25, 0.95)}, forwards=1)
    gen = tr.meta.final_tokens[8:24]
    assert gen.count(MASK) == 14                               # two decided, fourteen left masked
    assert tr.meta.token_ids == [20, 25] and tr.meta.generated_tokens == 2
    assert tr.nfe == 1 and tr.tpf == pytest.approx(2.0)


def test_a_stopped_run_with_an_early_stop_counts_neither_the_masked_slots_before_it_nor_the_slots_after_it():
    # one forward decides slot 0, the stop token at slot 3 and slot 6 after it: slots 1 and 2 are still masked
    tr = stopped_after({0: (20, 0.95), 3: (STOP, 0.95), 6: (26, 0.95)}, forwards=1)
    gen = tr.meta.final_tokens[8:24]
    assert gen[:4] == [20, MASK, MASK, STOP] and gen[6] == 26
    assert tr.meta.token_ids == [20, STOP]                     # what it decided, up to its stop token
    assert tr.meta.generated_tokens == 2 and tr.tpf == pytest.approx(2.0 / tr.nfe)
    assert tr.meta.text == "20 2"


def test_an_early_stop_run_counts_up_to_its_stop_token():
    # it decides slots 0-2, the stop at slot 3 and slot 6 after it, then (sure) slots 4, 5, 7: it ends at the stop
    tr = Generation(ScriptedAdapter(script({k: (20 + k, 0.95) for k in range(3)} | {3: (STOP, 0.95),
                                                                                   6: (26, 0.95)})),
                    PROMPT, build_decoder("threshold", tau=0.9, block_size=8, gen_length=16, use_cache=False,
                                          stop_at_eos=True)).run()
    assert tr.meta.stopped_at == 8 + 3 and tr.meta.final_tokens[8 + 6] == 26
    assert tr.meta.token_ids == [20, 21, 22, STOP]
    assert tr.meta.generated_tokens == 4 and tr.tpf == pytest.approx(4 / tr.nfe)
