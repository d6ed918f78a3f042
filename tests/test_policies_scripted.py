"""Threshold, LLaDA and S2D2 policies on scripted logits (no model): exactly what each step commits, and why."""

import numpy as np

from engine.decoders import build_decoder
from engine.runtime.loop import Generation
from engine.records.trace import Reason, Verdict
from tests.conftest import ScriptedAdapter
from engine.decoders.s2d2.card import S2D2Summary

PROMPT = [1, 10, 11, 12, 13, 14, 15, 16]           # 8 tokens: the block of 8 after it is fully masked
COMMON = dict(block_size=8, gen_length=8, use_cache=False, stop_at_eos=False)


def commits(trace) -> list[dict]:
    """Per record: {block-relative position: (token, reason)} of what it committed."""
    return [{int(r.positions[j]) - 8: (int(r.tokens_after[j]), int(r.reason[j])) for j in np.flatnonzero(r.committed)}
            for r in trace.records]


def run(script, **kw):
    return Generation(ScriptedAdapter(script), PROMPT, build_decoder(**COMMON, **kw)).run()


def test_threshold_commits_above_tau_else_the_argmax():
    rows = {0: [0.95, 0.5, 0.92, 0.3, 0.2, 0.2, 0.2, 0.2], 1: [0.0, 0.6, 0.0, 0.7, 0.5, 0.4, 0.3, 0.2]}
    script = lambda t: [(20 + k, rows.get(t, [0.99] * 8)[k] or 0.99) for k in range(8)]   # noqa: E731
    c = commits(run(script, name="threshold", tau=0.9))
    assert c[0] == {0: (20, Reason.THRESHOLD), 2: (22, Reason.THRESHOLD)}
    assert c[1] == {3: (23, Reason.ARGMAX)}                     # nothing clears τ: the most confident, forced
    assert c[2] == {k: (20 + k, Reason.THRESHOLD) for k in (1, 4, 5, 6, 7)}
    assert len(c) == 3


def test_llada_commits_its_quota_of_the_most_confident():
    conf = [0.1, 0.9, 0.3, 0.8, 0.5, 0.7, 0.2, 0.6]
    c = commits(run(lambda t: [(30 + k, conf[k]) for k in range(8)], name="llada", steps=4))
    assert [sorted(step) for step in c] == [[1, 3], [5, 7], [2, 4], [0, 6]]
    assert all(why == Reason.SCHEDULE for step in c for _, why in step.values())


def test_s2d2_greedy_accepts_the_matching_prefix_and_resamples_the_first_mismatch():
    def script(t):
        if t == 1:                                              # the verifier: agrees on 0..2, not on 3
            return [(20 + k if k < 3 else 40, 0.9) for k in range(8)]
        return [(20 + k, 0.6) for k in range(8)]                # drafts (and later verifies agree)

    tr = run(script, name="s2d2", router="always", acceptance="greedy")
    assert [r.kind for r in tr.records[:2]] == ["draft", "verify"]
    c = commits(tr)
    assert c[0] == {}                                           # the draft record commits nothing itself
    assert c[1] == {0: (20, Reason.ACCEPT), 1: (21, Reason.ACCEPT), 2: (22, Reason.ACCEPT), 3: (40, Reason.RESAMPLE)}
    v = tr.records[1]
    assert v.field("accepted") == 3 and v.field("rejected_at") == 8 + 3 and v.field("resampled") == 40
    assert v.field("verdict").tolist() == [Verdict.ACCEPTED] * 3 + [Verdict.RESAMPLED] + [Verdict.PENDING] * 4
    assert c[3] == {k: (20 + k, Reason.ACCEPT) for k in range(4, 8)}   # the next span verifies in full
    assert tr.meta.own(S2D2Summary) == S2D2Summary(accepted_tokens=7, verify_forwards=2)


def test_s2d2_router_never_falls_back_to_the_dynamic_rule():
    conf = [0.95, 0.2, 0.96, 0.5, 0.1, 0.1, 0.1, 0.1]
    tr = run(lambda t: [(20 + k, conf[k]) for k in range(8)], name="s2d2", router="never", tau=0.9, steps=4)
    c = commits(tr)
    assert all(r.kind == "draft" for r in tr.records) and tr.meta.summary["verify_forwards"] == 0
    assert c[0] == {0: (20, Reason.FALLBACK), 2: (22, Reason.FALLBACK)}   # quota 2, both above τ
    assert sorted(c[1]) == [1, 3]                                        # then the top-2 of the rest
    assert all(r.field("router")["decision"] is False for r in tr.records)
