import numpy as np
import pytest

from engine.decoders import build_decoder
from engine.runtime.loop import Generation
from engine.records.trace import Trace, TraceFormatError


def test_trace_roundtrip(adapter, tmp_path):
    tr = Generation(adapter, "Mia has 5 eggs . How many eggs are there now ?",
                    build_decoder("threshold", tau=0.8, block_size=4, gen_length=12)).run()
    tr.records[0].extra["demo"] = np.arange(tr.records[0].positions.size, dtype=np.float32)
    tr.records[1].extra["router"] = {"score": 0.5, "decision": True}
    path = tmp_path / "t.npz"
    tr.save(path)
    back = Trace.load(path)
    assert back.meta.token_ids == tr.meta.token_ids and back.meta.params == tr.meta.params
    assert len(back.records) == len(tr.records)
    for a, b in zip(tr.records, back.records):
        for f in ("positions", "tokens_before", "tokens_after", "committed", "reason", "candidate", "confidence"):
            assert np.array_equal(getattr(a, f), getattr(b, f))
        assert a.kind == b.kind and a.nfe == b.nfe
    assert np.array_equal(back.records[0].extra["demo"], tr.records[0].extra["demo"])
    assert "demo" not in back.records[1].extra
    assert back.records[1].extra["router"] == {"score": 0.5, "decision": True}


def test_trace_rejects_garbage(adapter, tmp_path):
    p = tmp_path / "bad.npz"
    p.write_bytes(b"not a zip")
    with pytest.raises(TraceFormatError, match="not a trace"):
        Trace.load(p)
    good = Generation(adapter, "Mia has 5 eggs .", build_decoder("ar", gen_length=4)).run().to_bytes()
    with pytest.raises(TraceFormatError):
        Trace.from_bytes(good[: len(good) // 2])                    # truncated
    arrays = Generation(adapter, "Mia has 5 eggs .", build_decoder("ar", gen_length=4)).run().to_arrays()
    arrays["__meta__"] = np.array(str(arrays["__meta__"]).replace('"format": 1', '"format": 99'))
    with pytest.raises(TraceFormatError, match="unsupported trace format 99"):
        Trace.from_arrays(arrays)


def test_a_records_own_fields_are_read_by_attribute_and_checked_per_decoder_and_kind():
    """Views read a decoder's fields as attributes of its card's contract (``fields``): a record of another
    decoder or kind has none, an undeclared name is an AttributeError; a trace saved earlier still reads so."""
    from pathlib import Path

    import pytest

    from engine.decoders.klass.card import KlassFields
    from engine.decoders.prophet.card import ProphetFields
    from engine.decoders.s2d2.card import S2D2VerifyFields
    from engine.records.trace import Trace, fields, own_records
    tr = Trace.load(Path(__file__).resolve().parent.parent / "assets" / "examples" / "klass.npz")
    own = own_records(tr, KlassFields)
    assert len(own) == sum(r.kind == "draft" for r in tr.records) > 0
    f = own[0][2]
    assert f.kl.shape == own[0][1].positions.shape and f.kl_eps == tr.meta.params["kl_eps"]
    with pytest.raises(AttributeError, match="not a field"):
        f.prophet_gap                                    # another decoder's field
    assert fields(own[0][1], ProphetFields) is None and fields(own[0][1], S2D2VerifyFields) is None
    assert not own_records(Trace.load(Path(__file__).resolve().parent.parent / "assets" / "examples" / "s2d2.npz"),
                           KlassFields)
    r = own[0][1]                                        # the generic contracts, by attribute too
    assert r.topk.topk_ids is r.extra["topk_ids"] and r.topk.topk_ids.shape == (len(r.positions), 5)
    assert r.kv.drift is None and r.fill.fill_positions is None      # declared, absent from this forward
    with pytest.raises(AttributeError, match="not a field"):
        r.topk.kl                                        # a KLASS field is not a candidates field


def test_a_decoder_may_emit_only_the_payload_its_card_declares_for_the_kind():
    """Its own fields travel as its card's dataclass for the record's kind; another decoder's payload, a decoder
    field passed loose, or a payload on a kind its card gives none are refused."""
    import pytest

    from engine.decoders import build_decoder
    from engine.decoders.klass.card import KlassFields
    from engine.decoders.klass.policy import KlassPolicy
    from engine.decoders.prophet.card import ProphetFields
    from engine.runtime.loop import Generation
    from tests.conftest import ScriptedAdapter

    def emitting(kind, *payload, **loose):
        class Emits(KlassPolicy):
            def run_block(self, ctx):
                _, st = yield from ctx.draft()
                ctx.commit(ctx.masked.nonzero()[:, 0], st.candidate[ctx.masked], 0 + 1)
                yield ctx.emit(kind, st, *payload, **loose)
        policy = Emits(build_decoder("klass", block_size=4, gen_length=4, use_cache=False).cfg)
        return Generation(ScriptedAdapter(lambda t: [(20 + k, 0.9) for k in range(4)]), [1, 10, 11, 12], policy).run()

    nan = np.full(4, np.nan, np.float32)
    tr = emitting("draft", KlassFields(kl=nan, kl_stable=np.zeros(4, bool), klass_ready=0, kl_eps=0.01))
    assert tr.records[0].extra["kl_eps"] == 0.01
    gap = ProphetFields(logit_gap=nan, prophet_gap=1.0, prophet_bar=2.0, progress=0.5, exited=False)
    with pytest.raises(AssertionError, match=r"klass.draft records carry \['exited', 'logit_gap'"):
        emitting("draft", gap)                                              # Prophet's payload on a KLASS record
    with pytest.raises(AssertionError, match="not generic record fields"):
        emitting("draft", prophet_gap=1.0)                                  # a decoder's field passed loose
    with pytest.raises(AssertionError, match=r"klass.verify records carry"):
        emitting("verify", KlassFields(kl=nan, kl_stable=np.zeros(4, bool), klass_ready=0, kl_eps=0.01))


def test_a_decoder_s_summary_is_its_card_s_type_and_an_older_trace_s_loads(tmp_path):
    """Saved flat beside the metadata, read back typed; another decoder's type reads as None; a trace saved before
    a field existed (or in the old nested layout) loads with the defaults."""
    from engine.catalogue.cards import SpeculativeSummary
    from engine.decoders.s2d2.card import S2D2Summary
    from engine.decoders.simsd.card import SimSDSummary
    from engine.decoders.uniform.card import UniformSummary
    from engine.records.trace_meta import TraceMeta
    meta = TraceMeta.from_dict(dict(decoder="s2d2", accepted_tokens=5, verify_forwards=2))
    assert meta.own(S2D2Summary) == S2D2Summary(accepted_tokens=5, verify_forwards=2)
    assert meta.own(SpeculativeSummary) == SpeculativeSummary(accepted_tokens=5)      # the bench's generic read
    assert meta.own(SimSDSummary) is None and TraceMeta(decoder="threshold").own(SpeculativeSummary) is None
    old = TraceMeta.from_dict(dict(decoder="s2d2", accepted_tokens=5))                # before verify_forwards
    assert old.own(S2D2Summary).verify_forwards == 0
    nested = TraceMeta.from_dict(dict(decoder="uniform", uniform=dict(t_max=0.3)))     # the layout before types
    assert nested.own(UniformSummary) == UniformSummary()


def test_a_policy_s_summary_must_be_its_card_s_type(adapter):
    import pytest
    from engine.decoders import build_decoder
    from engine.runtime.loop import Generation
    policy = build_decoder("prophet", gen_length=8)
    policy.summary = lambda runner: {"exit_forward": 1}                          # a plain dict: refused
    with pytest.raises(AssertionError, match="prophet's summary"):
        Generation(adapter, adapter.encode_prompt("hi"), policy).run()


def test_the_shared_verify_payload_reads_every_draft_and_verify_decoder_s_verify_records():
    """S2D2's and SimSD's verify payloads extend VerifyFields: one read serves the verifier's map, the bench and
    the tour; their draft records and other decoders' records are not verify records."""
    from pathlib import Path

    from engine.catalogue.cards import VerifyFields
    from engine.decoders.s2d2.card import S2D2VerifyFields
    from engine.records.trace import own_records
    root = Path(__file__).resolve().parent.parent / "assets" / "examples"
    for name in ("s2d2", "simsd"):
        tr = Trace.load(root / f"{name}.npz")
        own = own_records(tr, VerifyFields)
        assert [s for s, *_ in own] == [s for s, r in enumerate(tr.records) if r.kind == "verify"] != []
        assert all(f.accepted >= 0 and f.verdict.shape == r.positions.shape for _, r, f in own)
    simsd = Trace.load(root / "simsd.npz")
    assert not own_records(simsd, S2D2VerifyFields)                 # a sibling's payload is not a base
    assert not own_records(Trace.load(root / "threshold.npz"), VerifyFields)


@pytest.mark.parametrize("prompt,unknown", [("1 + 2 = ?", []),
                                            ("what is 3 € 4 ☃ € plus", ["what", "is", "€", "☃", "plus"])])
def test_a_trace_names_the_prompts_words_its_tokenizer_maps_to_unk(prompt, unknown):
    """The page warns about them (explorer.views.summary); the trace finds them from the prompt's own ids, and
    asks the tokenizer again only when an [UNK] is among those ids."""
    from engine.models.model import load_model
    a = load_model("unmask-tasks-small", device="cpu")
    tr = Generation(a, prompt, build_decoder("threshold", block_size=4, gen_length=4)).run()
    assert tr.meta.unknown_words == unknown == a.unknown_words(prompt)
    assert (a.tokenizer.unk_token_id in tr.meta.prompt_ids) == bool(unknown)
