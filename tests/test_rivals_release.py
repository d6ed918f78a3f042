"""Prophet and KLASS as released, on hand-computed cases taken from the released code: Prophet's answer window
(pixeli99/Prophet ``eval.sh`` + ``eval_llada.py`` + ``generate_earlyexit.generate``) against Unmask's block rule,
and KLASS's statistics (shkim0116/KLASS ``llada_klass.stable_confident_decode`` at T > 0, ``dream_klass``'s
one-token fallback) against Unmask's earlier choice. Scripted logits as tests/test_rivals.py's: a slot's candidate
has log c, each of the other 49 ids log((1 − c)/49), so its top-2 gap is log(49c/(1 − c))."""

import math

import numpy as np
import pytest
import torch

from engine.decoders import build_decoder
from engine.decoders.klass.policy import perturbed_softmax
from engine.decoders.prophet.card import ProphetSummary
from engine.errors import ConfigError
from engine.records.trace import Reason
from engine.runtime.loop import Generation
from tests.conftest import ScriptedAdapter
from tests.test_rivals import PROMPT, commits
from tests.test_rivals_full import FullScripted

P = len(PROMPT)
WORDS = {" The": 30, " answer": 31, " is": 32}


class Words:
    """The phrase's words, one id each (the release encodes each with a leading space)."""
    unk_token_id = 0

    def encode(self, text, add_special_tokens=True):
        assert not add_special_tokens
        return [WORDS.get(text, self.unk_token_id)]


class Phrased(FullScripted):
    tokenizer = Words()


def prophet(script, **kw):
    cfg = dict(block_size=8, gen_length=16, use_cache=False, stop_at_eos=False, name="prophet")
    return Generation(Phrased(script), PROMPT, build_decoder(**{**cfg, **kw})).run()


def gap(c: float) -> float:
    return math.log(49 * c / (1 - c))


LOW, HIGH = 0.025, 0.99999           # gaps log(49 · .025/.975) = 0.23 and log(49 · .99999/1e-5) = 15.4
WINDOW = range(6, 11)                # the phrase at response slots 2, 3, 4: max(constraints) + 2 = 6, five slots


def test_prophet_answer_window_is_the_five_slots_after_the_written_phrase():
    tr = prophet(lambda t: [(20 + k, HIGH) for k in range(16)], prophet_window="answer", answer_at=2)
    assert tr.meta.final_tokens[P + 2:P + 5] == [30, 31, 32]            # written before the first forward, kept
    assert tr.meta.own(ProphetSummary).answer_window == [P + 6, P + 11]
    assert not tr.records[0].committed[2:5].any()                       # never committed: they were never masked


def test_prophet_block_rule_exits_on_confident_filler_where_the_release_would_not():
    """The issue's case: the block's masked slots are mostly confident filler (gap 15.4), the answer slots are
    not (gap 0.23). Block rule: mean over block 1's 8 masked slots = (6 · 15.4 + 2 · 0.23)/8 = 11.6 ≥ 7.5, exit at
    forward 1. Answer window (slots 6–10, all at 0.23): never clears a bar (even the late 2.5), no exit."""
    script = lambda t: [(20 + k, LOW if k in WINDOW else HIGH) for k in range(16)]   # noqa: E731
    block = prophet(script)
    assert block.records[0].field("prophet_gap") == pytest.approx((6 * gap(HIGH) + 2 * gap(LOW)) / 8, abs=1e-4)
    assert block.meta.own(ProphetSummary).exit_forward == 1
    answer = prophet(script, prophet_window="answer", answer_at=2)
    assert answer.records[0].field("prophet_gap") == pytest.approx(gap(LOW), abs=1e-4)
    assert answer.meta.own(ProphetSummary).exit_forward is None
    assert all(set(c.values()) <= {Reason.SCHEDULE} for c in commits(answer))
    # the release's schedule: every block runs its 8 forwards, block 1's last 3 with nothing left to commit
    assert answer.nfe == 16 and [len(c) for c in commits(answer)[:8]] == [1] * 5 + [0] * 3


def test_prophet_answer_window_exits_when_the_answer_is_clear_though_the_block_is_not():
    """The converse: the window at gap 15.4, the rest at 0.23. Answer window: exit at forward 1 (15.4 ≥ 7.5),
    every [MASK] of the canvas filled there; block rule (no phrase written: 8 masked slots, 6 and 7 in the window)
    (2 · 15.4 + 6 · 0.23)/8 = 4.0, below 7.5: no exit at forward 1."""
    script = lambda t: [(20 + k, HIGH if k in WINDOW else LOW) for k in range(16)]   # noqa: E731
    answer = prophet(script, prophet_window="answer", answer_at=2)
    assert answer.records[0].field("prophet_gap") == pytest.approx(gap(HIGH), abs=1e-4)
    assert answer.meta.own(ProphetSummary).exit_forward == 1 and len(answer.records) == 1
    assert 3 not in answer.meta.final_tokens[P:]
    block = prophet(script)
    assert block.records[0].field("prophet_gap") == pytest.approx((2 * gap(HIGH) + 6 * gap(LOW)) / 8, abs=1e-4)
    assert block.meta.own(ProphetSummary).exit_forward != 1


def test_prophet_answer_window_needs_the_phrase_in_the_models_vocabulary_and_in_the_canvas():
    class NoWords(FullScripted):
        class tokenizer:
            unk_token_id = 0

            @staticmethod
            def encode(text, add_special_tokens=True):
                return [0]

    with pytest.raises(ConfigError, match="no tokens for"):
        Generation(NoWords(lambda t: [(20, 0.9)] * 16), PROMPT, build_decoder(
            "prophet", block_size=8, gen_length=16, use_cache=False, prophet_window="answer", answer_at=2)).run()
    with pytest.raises(ConfigError, match="answer_at"):
        prophet(lambda t: [(20, 0.9)] * 16, prophet_window="answer", answer_at=16)



def test_prophet_places_a_multi_token_word_as_the_release_does():
    """_parse_constraints (its lines, re-typed) on eval.sh's "2:The|3:answer|4:is" with " The" two tokens (30, 35):
    35 goes to slot 3, which " answer" then overwrites; the phrase ends at 4 and the window starts at 4 + 2."""
    from engine.decoders.prophet.policy import phrase_slots

    class TwoTokenThe:
        unk_token_id = 0

        def encode(self, text, add_special_tokens=True):
            return [30, 35] if text == " The" else [WORDS[text]]

    def parse_constraints(text, tokenizer):
        constraints = {}
        for part in text.split("|"):
            pos_str, word = part.split(":", 1)
            for i, tid in enumerate(tokenizer.encode(" " + word.strip(), add_special_tokens=False)):
                constraints[int(pos_str) + i] = tid
        return constraints

    assert phrase_slots(TwoTokenThe(), 2) == parse_constraints("2:The|3:answer|4:is", TwoTokenThe()) == \
        {2: 30, 3: 31, 4: 32}

    class TwoToken(Phrased):
        tokenizer = TwoTokenThe()

    tr = Generation(TwoToken(lambda t: [(20 + k, HIGH) for k in range(16)]), PROMPT, build_decoder(
        "prophet", block_size=8, gen_length=16, use_cache=False, stop_at_eos=False, prophet_window="answer",
        answer_at=2)).run()
    assert tr.meta.final_tokens[P + 2:P + 6] == [30, 31, 32, 20 + 5]          # not 30, 35, 31, 32
    assert tr.meta.own(ProphetSummary).answer_window == [P + 6, P + 11]


class ShiftedPhrased(Phrased):
    model_type, logit_shift = "Dream", 1


@pytest.mark.parametrize("kind", [Phrased, ShiftedPhrased])
def test_prophet_scores_a_finished_blocks_answer_window_on_dream_too(kind):
    """The window (answer_length 3: slots 4–6, block 1) stays unclear through block 1's 8 forwards and is clear
    from forward 9 (block 2's first): every forward scores the whole canvas, so the exit comes there on LLaDA and,
    as the release scores every position, on a shifted (Dream-type) model too (it once read nothing there)."""
    script = lambda t: [(20 + k, HIGH if t >= 8 and k in (4, 5, 6) else LOW) for k in range(16)]   # noqa: E731
    tr = Generation(kind(script), PROMPT, build_decoder(
        "prophet", block_size=8, gen_length=16, use_cache=False, stop_at_eos=False, prophet_window="answer",
        answer_at=0, answer_length=3)).run()
    assert tr.meta.own(ProphetSummary).answer_window == [P + 4, P + 7]
    assert tr.meta.own(ProphetSummary).exit_forward == 9 and tr.nfe == 9
    assert tr.records[8].field("prophet_gap") == pytest.approx(gap(HIGH), abs=1e-4)

# ---- KLASS ------------------------------------------------------------------------------------------------
def test_klass_perturbed_softmax_by_hand():
    """``add_gumbel_noise`` then softmax: logits (ln 2, 0), −log u = (1, 2): values (2/1, 1/2^T)."""
    logits, u = torch.tensor([[math.log(2), 0.0]]), torch.tensor([[math.exp(-1), math.exp(-2)]])
    assert perturbed_softmax(logits, u, 1.0)[0, 0].item() == pytest.approx(1 / (1 + math.exp(0.5 - 2)))
    assert perturbed_softmax(logits, u, 2.0)[0, 0].item() == pytest.approx(1 / (1 + math.exp(0.25 - 2)))
    # a logit offset the model's softmax ignores makes it one-hot: exp(20 + ln 2) vs exp(20)/4
    assert perturbed_softmax(logits + 20, u, 2.0)[0, 0].item() == pytest.approx(1.0)


class Offset(ScriptedAdapter):
    """The scripted rows + 20: the model's softmax is the same, its exp-logits (what the release perturbs) are
    e^20 times larger, as a real model's logits of a few tens are."""

    def forward(self, ids, mask, pos, cache=None):
        return super().forward(ids, mask, pos, cache) + 20.0


def klass(adapter, **kw):
    cfg = dict(block_size=8, gen_length=8, use_cache=False, stop_at_eos=False, name="klass", steps=8,
               temperature=1.0)
    return Generation(adapter, PROMPT, build_decoder(**{**cfg, **kw})).run()


def test_klass_at_t1_reads_the_perturbed_softmax_as_released():
    """Every slot's candidate at c = 0.6 (below τ = 0.9). Unmask's earlier choice reads p = 0.6: never ready, the
    quota commits everything. As released the perturbed softmax is one-hot on the drawn token (confidence ≈ 1),
    so a slot drawn the same way in consecutive forwards is stable and committed by KLASS's own rule."""
    script = lambda t: [(20 + k, 0.6) for k in range(8)]                 # noqa: E731
    stable = 0
    for seed in range(4):
        own = klass(Offset(script), seed=seed, klass_as="unmask")
        assert all(set(c.values()) <= {Reason.SCHEDULE} for c in commits(own))
        assert own.records[0].confidence.max() < 0.7
        rel = klass(Offset(script), seed=seed)
        assert (rel.records[0].confidence > 0.999).all()                  # its x̂'s p under the perturbed softmax
        stable += sum(v == Reason.KL_STABLE for c in commits(rel) for v in c.values())
    assert stable > 0


def test_klass_at_t0_is_the_same_either_way():
    script = lambda t: [(20 + k, 0.95 if t > 1 else 0.6) for k in range(8)]   # noqa: E731
    a, b = (klass(Offset(script), temperature=0.0, klass_as=v) for v in ("release", "unmask"))
    assert a.meta.final_tokens == b.meta.final_tokens and commits(a) == commits(b)


class DreamScripted(FullScripted):
    model_type = "Dream"


def test_klass_on_dream_falls_back_to_exactly_one_token_as_released():
    """Forward 1 has no KL history, so nothing is ready: Dream's release commits one token, the most confident
    masked slot (slot 3 at c = 0.8), with its argmax; the quota (8 masks over 2 steps) would commit 4."""
    conf = [0.5, 0.6, 0.55, 0.8, 0.7, 0.65, 0.5, 0.5]
    script = lambda t: [(20 + k, conf[k % 8]) for k in range(16)]        # noqa: E731
    cfg = dict(block_size=8, gen_length=16, use_cache=False, stop_at_eos=False, steps=2)
    rel = Generation(DreamScripted(script), PROMPT, build_decoder("klass", **cfg)).run()
    assert commits(rel)[0] == {3: Reason.SCHEDULE} and rel.meta.final_tokens[P + 3] == 23
    assert all(len(c) == 1 for c in commits(rel) if set(c.values()) == {Reason.SCHEDULE})
    own = Generation(DreamScripted(script), PROMPT, build_decoder("klass", klass_as="unmask", **cfg)).run()
    assert np.array_equal(sorted(commits(own)[0]), [1, 3, 4, 5])


def test_klass_on_dream_samples_at_the_temperature_then_top_p():
    """Dream-KLASS's ``sample_tokens`` (its lines, re-typed): logits / T, then ``top_p_logits`` (the crossing token
    stays), then top-k, then the softmax. At the release's T = .2, top-p .95 that is not top-p first: on random toy
    logits the two distributions differ on most rows, and so would the fallback's slot."""
    from engine.decoders.klass.policy import dream_sample_probs
    from engine.runtime.sampling import make_generator, transformed_probs

    def released(logits, temperature, top_p, top_k):
        logits = logits / temperature
        sorted_logits, sorted_indices = torch.sort(logits, descending=True)
        remove = torch.cumsum(torch.softmax(sorted_logits, dim=-1), dim=-1) > top_p
        remove[..., 1:] = remove[..., :-1].clone()
        remove[..., 0] = 0
        logits = logits.masked_fill(torch.zeros_like(logits, dtype=torch.bool).scatter_(-1, sorted_indices, remove),
                                    torch.finfo(logits.dtype).min)
        if top_k:
            logits = logits.masked_fill(logits < torch.topk(logits, top_k)[0][..., -1, None],
                                        torch.finfo(logits.dtype).min)
        return torch.softmax(logits, dim=-1)

    z = torch.randn(200, 12, dtype=torch.float64, generator=make_generator(0))
    for t, p, k in ((0.2, 0.95, 0), (1.0, 0.9, 0), (0.5, 0.8, 3), (0.7, 1.0, 4)):
        assert torch.allclose(dream_sample_probs(z, t, k, p), released(z, t, p, k), rtol=0, atol=1e-15)
    ours, before = dream_sample_probs(z, 0.2, 0, 0.95), transformed_probs(z, 0.2, 0, 0.95)
    assert (ours - before).abs().max(-1).values.gt(1e-9).sum() > 100
