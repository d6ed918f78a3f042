"""The revising decoders (edit, wino, remdm) and EB on scripted logits: what each forward writes, rewrites or
re-masks, and why; and on a real tiny model, that the exact block cache stays exact for each of them."""

import math

import numpy as np
import pytest
import torch

from engine.decoders import build_decoder
from engine.runtime.loop import Generation
from engine.records.trace import Reason, Revision
from tests.conftest import ScriptedAdapter

PROMPT = [1, 10, 11, 12, 13, 14, 15, 16]           # 8 tokens: the block of 8 after it is fully masked
COMMON = dict(block_size=8, gen_length=8, use_cache=False, stop_at_eos=False)


def run(script, **kw):
    return Generation(ScriptedAdapter(script), PROMPT, build_decoder(**COMMON, **kw)).run()


def revised(rec) -> dict:
    """{block-relative slot: (code, old token, new token)} of one record's revisions."""
    if not rec.has("revised"):
        return {}
    codes, old = rec.field("revised"), rec.field("revised_from")
    return {int(j): (int(codes[j]), int(old[j]), int(rec.tokens_after[j])) for j in np.flatnonzero(codes)}


def test_edit_rewrites_a_written_token_the_model_now_prefers_with_p_above_tau_edit():
    def script(t):
        if t == 1:                        # the post-block forward: slot 2 is now 40 at p 0.8, slot 5 40 at p 0.6
            return [(40 if k in (2, 5) else 20 + k, 0.8 if k == 2 else 0.6 if k == 5 else 0.95) for k in range(8)]
        return [(40 if k == 2 else 20 + k, 0.95) for k in range(8)] if t > 1 else [(20 + k, 0.95) for k in range(8)]

    tr = run(script, name="edit", tau=0.9, tau_edit=0.7, post_steps=2)
    assert tr.records[0].n_committed == 8 and revised(tr.records[0]) == {}
    assert revised(tr.records[1]) == {2: (Revision.EDIT, 22, 40)}      # 5 is below τ_edit: kept
    assert revised(tr.records[2]) == {} and len(tr.records) == 3       # a forward that changes nothing ends it
    assert tr.meta.final_tokens[8:] == [20, 21, 40, 23, 24, 25, 26, 27]
    one = run(script, name="edit", tau=0.9, tau_edit=0.7, post_steps=1)
    assert len(one.records) == 2                                       # the post steps are spent: no third


def test_edit_never_edits_without_post_steps_on_a_block_filled_at_once():
    tr = run(lambda t: [(20 + k, 0.95) for k in range(8)], name="edit", post_steps=0)
    assert len(tr.records) == 1 and tr.nfe == 1


def test_wino_drafts_wide_and_remasks_what_the_next_forward_does_not_support():
    def script(t):
        if t == 0:
            return [(20 + k, 0.7 if k < 4 else 0.3) for k in range(8)]
        return [(41 if k == 1 else 20 + k, 0.95) for k in range(8)]   # slot 1's token 21 loses its support

    tr = run(script, name="wino", tau_wide=0.6, tau_narrow=0.9)
    r0, r1, r2 = tr.records
    assert r0.n_committed == 4 and r0.field("drafted") == 4 and r0.field("rejected") == 0
    assert revised(r1) == {1: (Revision.WINO_REJECT, 21, 3)}           # back to [MASK] (id 3)
    assert r1.field("drafted") == 4 and r1.field("rejected") == 1
    assert r2.n_committed == 1 and tr.meta.final_tokens[9] == 41 and revised(r2) == {}


def test_wino_caps_its_drafts_at_max_accept():
    """8 masked slots: max_accept = min(max(⌊0.7·8⌋, 5), 20) = 5, the five most confident (decoding_wino)."""
    conf = [0.99, 0.98, 0.97, 0.96, 0.95, 0.94, 0.93, 0.92]
    tr = run(lambda t: [(20 + k, conf[k] if t == 0 else 0.95) for k in range(8)], name="wino", tau_wide=0.6)
    r0 = tr.records[0]
    assert r0.field("drafted") == 5 and sorted(np.flatnonzero(r0.committed).tolist()) == [0, 1, 2, 3, 4]


def test_wino_drafts_strictly_above_tau_wide():
    from engine.decoders.wino.policy import max_accept, wide_in
    masked = torch.ones(3, dtype=torch.bool)
    assert wide_in(torch.tensor([0.6, 0.7, 0.5]), masked, 0.6).tolist() == [1]        # 0.6 is not > 0.6
    assert wide_in(torch.tensor([0.6, 0.5, 0.4]), masked, 0.6).tolist() == [0]        # none above: the best
    assert [max_accept(m) for m in (1, 7, 8, 20, 40)] == [5, 5, 5, 14, 20]


def test_wino_remasks_only_after_a_forward_that_drafted_more_than_one():
    def script(t):
        if t == 0:
            return [(20 + k, 0.7 if k == 0 else 0.3) for k in range(8)]          # drafts slot 0 alone
        return [(41 if k == 0 else 20 + k, 0.95 if k == 0 else 0.7 if k == 1 else 0.3) for k in range(8)]

    tr = run(script, name="wino", tau_wide=0.6, tau_narrow=0.9)
    r1 = tr.records[1]
    assert r1.field("drafted") == 1 and revised(r1) == {}                     # slot 0 unsupported, yet kept


def test_wino_remasks_at_most_last_accept_minus_one():
    def script(t):
        if t == 0:
            return [(20 + k, 0.7 if k < 2 else 0.3) for k in range(8)]           # drafts slots 0 and 1
        if t == 1:                                                               # both lose their support; 2, 3 drafted
            return [(40, 0.95), (41, 0.9)] + [(20 + k, 0.95 if k < 4 else 0.3) for k in range(2, 8)]
        return [(20 + k, 0.95) for k in range(8)]

    tr = run(script, name="wino", tau_wide=0.6, tau_narrow=0.9)
    r1 = tr.records[1]
    # two unsupported ≥ last_accept = 2: only last_accept − 1 = 1, the least supported (slot 0: p(20) = 0.05/49)
    assert r1.field("drafted") == 2 and revised(r1) == {0: (Revision.WINO_REJECT, 20, 3)}


def test_remdm_cap_sigma_by_hand():
    """σ = min(η, (1 − α_s)/α_t) on t_j = 1 − j/S (S = 4): α_t, α_s = (0, .25), (.25, .5), (.5, .75), (.75, 1)."""
    from engine.decoders.remdm.policy import sigma_cap, sigma_conf
    assert [sigma_cap(0.5, j, 4) for j in range(4)] == [0.5, 0.5, 0.5, 0.0]
    assert [sigma_cap(0.3, j, 4) for j in range(4)] == [0.3, 0.3, 0.3, 0.0]
    assert sigma_cap(0.9, 2, 4) == 0.5                        # (1 − .75)/.5: the cap binds
    # remdm-conf: σ_max · softmax(−p at unmasking); p = 0.9 and 0.5 at j = 2 of 4 (σ_max = 0.5)
    e = [math.exp(-0.9), math.exp(-0.5)]
    want = [0.5 * x / sum(e) for x in e]
    assert torch.allclose(sigma_conf(torch.tensor([0.9, 0.5]), 2, 4), torch.tensor(want))


@pytest.mark.parametrize("remask", ["cap", "rescale", "conf", "loop"])
@pytest.mark.parametrize("fill", ["random", "confident"])
def test_remdm_never_refills_a_slot_in_the_forward_that_remasked_it(remask, fill):
    conf = [0.9, 0.8, 0.7, 0.6, 0.55, 0.5, 0.45, 0.4]
    back = 0
    for seed in range(6):
        tr = run(lambda t: [(20 + k, conf[k]) for k in range(8)], name="remdm", steps=4, eta=0.5, remask=remask,
                 seed=seed, remdm_fill=fill, t_on=0.8, t_off=0.3)     # loop: forwards 1, 2 in the window
        for r in tr.records:
            for j, (code, old, new) in revised(r).items():
                assert code == Revision.REMASK and new == 3 and not r.committed[j]   # waits, still [MASK]
                back += 1
        assert len(tr.records) <= 4 and not (np.array(tr.meta.final_tokens[8:]) == 3).any()
        assert len(tr.records) == 4 or revised(tr.records[-1]) == {}   # σ = 0 at the last forward
    assert back > 0                                               # over six seeds, something went back


def test_remdm_remasks_with_the_seeded_draw():
    """Forward 1 of 4 (σ = 0.5 for both tokens written at forward 0): the re-masked set is the draws below σ (one
    uniform per slot of the block and forward; the written slots 0 and 1 read theirs)."""
    from engine.runtime.sampling import make_generator
    conf = [0.9, 0.8, 0.7, 0.6, 0.55, 0.5, 0.45, 0.4]
    tr = run(lambda t: [(20 + k, conf[k]) for k in range(8)], name="remdm", steps=4, eta=0.5, seed=11,
             remdm_fill="confident")
    g = make_generator(11)                                       # the decode's only random draws are ReMDM's
    torch.rand(8, dtype=torch.float64, generator=g)              # forward 0's
    draws = torch.rand(8, dtype=torch.float64, generator=g).float()[:2]
    assert set(revised(tr.records[1])) == {j for j, d in zip((0, 1), draws.tolist()) if d < 0.5}


def nats(c: float, V: int = 50, mask_id: int = 3) -> float:
    """The scripted row's entropy once [MASK] is forbidden (the engine never predicts it), by hand."""
    row = np.full(V, math.log((1 - c) / (V - 1)))
    row[0] = math.log(c)
    row[mask_id] = -np.inf
    p = np.exp(row - row.max())
    p /= p.sum()
    return float(-(p[p > 0] * np.log(p[p > 0])).sum())


def test_eb_commits_the_lowest_entropy_prefix_within_the_bound():
    conf = [0.999, 0.99, 0.98, 0.9, 0.6, 0.5, 0.4, 0.3]
    gamma = 0.3
    tr = run(lambda t: [(20 + k, conf[k]) for k in range(8)], name="eb", entropy_bound=gamma)
    h = sorted((nats(c), k) for k, c in enumerate(conf))
    expect, before = [], 0.0
    for e, k in h:                       # sorted ascending, so Σ H − max H is the sum of the ones before
        if before > gamma:
            break
        expect.append(k)
        before += e
    r0 = tr.records[0]
    assert sorted(int(j) for j in np.flatnonzero(r0.committed)) == sorted(expect)
    assert all(int(x) == Reason.ENTROPY_BOUND for x in r0.reason[r0.committed])
    assert np.allclose(np.sort(r0.field("entropy_nats")), [e for e, _ in h], atol=1e-5)


@pytest.mark.parametrize("spec", [dict(name="edit", tau=0.5, tau_edit=0.3, post_steps=2),
                                  dict(name="wino", tau_wide=0.3, tau_narrow=0.6),
                                  dict(name="remdm", steps=4, eta=0.3), dict(name="eb", entropy_bound=1.0)])
def test_revising_decoders_keep_the_block_cache_exact(adapter, spec):
    spec = dict(spec, temperature=1.0, seed=5, block_size=4, gen_length=16, stop_at_eos=False)
    name = spec.pop("name")
    prompt = "Ben has 12 coins . He finds 7 more . How many coins does he have now ?"
    a = Generation(adapter, prompt, build_decoder(name, **spec)).run()
    b = Generation(adapter, prompt, build_decoder(name, use_cache=False, **spec)).run()
    assert a.meta.final_tokens == b.meta.final_tokens and a.nfe == b.nfe
    assert [r.field("revised") is not None for r in a.records] == [r.field("revised") is not None for r in b.records]


class WholeRowsAdapter(ScriptedAdapter):
    """Scripted logits for every row a forward computes (the previous block's too): script(call, position)."""

    def forward(self, ids, mask, pos, cache=None):
        rows = []
        for p in pos.tolist():
            cand, c = self.script(self.calls, p)
            row = torch.full((self.vocab_size,), float(np.log((1 - c) / (self.vocab_size - 1))))
            row[cand] = float(np.log(c))
            rows.append(row)
        self.calls += 1
        return torch.stack(rows)


def test_edit_checks_the_finished_block_in_the_next_blocks_first_forward_at_no_extra_forward():
    def script(t, p):
        if t == 1 and p == 10:            # block 2's first forward recomputes block 1: slot 10 should be 40
            return 40, 0.9
        return 20 + p % 8, 0.95

    policy = build_decoder("edit", block_size=8, gen_length=16, use_cache=False, stop_at_eos=False, tau_edit=0.7)
    tr = Generation(WholeRowsAdapter(script), PROMPT, policy).run()
    assert tr.nfe == 2                                                  # one forward per block, nothing extra
    r1 = tr.records[1]
    assert r1.field("prev_positions").tolist() == [10] and r1.field("prev_from").tolist() == [22]
    assert r1.field("prev_to").tolist() == [40] and tr.meta.final_tokens[10] == 40
    from explorer.grid import Grid
    g = Grid.of(tr)
    assert g.tokens[0][10 - 8] == 22 and g.tokens[1][10 - 8] == 40 and g.revisions == [(1, 2, 1, 22, 40)]
    off = build_decoder("edit", block_size=8, gen_length=16, use_cache=False, stop_at_eos=False, check_next=False)
    assert Generation(WholeRowsAdapter(script), PROMPT, off).run().meta.final_tokens[10] == 22


def test_edit_checks_the_whole_previous_block_before_a_short_last_block():
    """Blocks [8, 16) and a short [16, 21): the last block's first forward checks all of [8, 16), slot 9 too
    (the block length, 5, would have checked only [11, 16))."""
    def script(t, p):
        if t == 1 and p == 9:
            return 40, 0.9
        return 20 + p % 8, 0.95

    policy = build_decoder("edit", block_size=8, gen_length=13, use_cache=False, stop_at_eos=False, tau_edit=0.7)
    tr = Generation(WholeRowsAdapter(script), PROMPT, policy).run()
    assert tr.records[1].field("prev_positions").tolist() == [9] and tr.meta.final_tokens[9] == 40


def test_edit_runs_its_post_steps_on_the_block_that_holds_the_stop_token():
    """stop_at_eos with post steps: the stop token (id 2) is written in the first forward, yet the block's post
    step still runs and rewrites slot 1 (SGLang's JointThreshold); then the run stops."""
    def script(t):
        if t == 0:
            return [(2 if k == 3 else 20 + k, 0.95) for k in range(8)]
        return [(41 if k == 1 else 2 if k == 3 else 20 + k, 0.9 if k == 1 else 0.95) for k in range(8)]

    tr = Generation(ScriptedAdapter(script), PROMPT,
                    build_decoder("edit", block_size=8, gen_length=16, use_cache=False, stop_at_eos=True,
                                  post_steps=1, tau_edit=0.7)).run()
    assert len(tr.records) == 2 and revised(tr.records[1]) == {1: (Revision.EDIT, 21, 41)}
    assert tr.meta.stopped_at == 11 and tr.meta.final_tokens[9] == 41


def test_every_view_draws_a_revising_run_and_marks_its_revisions():
    from explorer.render import render_all
    from explorer.views.heatmaps import mask_state
    from explorer.views.revise import eb_prefix, token_history, wino_counts

    def script(t, p):
        return (40, 0.9) if t == 1 and p == 10 else (20 + p % 8, 0.95)

    policy = build_decoder("edit", block_size=8, gen_length=16, use_cache=False, stop_at_eos=False)
    tr = Generation(WholeRowsAdapter(script), PROMPT, policy).run()
    out = render_all(tr, 1, None, 10)
    assert set(out) >= {"history", "eb", "wino", "mask"}
    marks = [d for d in mask_state(tr, 1).data if d.name == "revised"]
    assert len(marks) == 1 and list(marks[0].y) == [2] and "edited: 22 → 40" in marks[0].text[0]
    hist = token_history(tr, 1, None, 10)
    assert list(hist.data[0].y) == ["22", "40"] and hist.data[1].name == "revised"
    assert "run the eb decoder" in eb_prefix(tr, 1).layout.annotations[0].text
    assert "run the wino decoder" in wino_counts(tr, 1).layout.annotations[0].text
    eb = Generation(ScriptedAdapter(lambda t: [(20 + k, [0.999, 0.9, 0.5, 0.4, 0.3, 0.3, 0.3, 0.3][k])
                                               for k in range(8)]), PROMPT,
                    build_decoder("eb", **COMMON, entropy_bound=0.5)).run()
    bars = eb_prefix(eb, 0).data[0]
    assert list(bars.y) == sorted(bars.y) and len(bars.y) == 8                # sorted, lowest entropy first


def test_wino_never_remasks_after_a_forward_that_drafted_one_even_when_the_last_drafted_more():
    """The accepted <= 1 guard alone: forward 0 drafts two (last_accept = 2), forward 1 drafts one while slot 0
    loses its support; without the guard slot 0 (one weak < last_accept) would go back to [MASK]."""
    def script(t):
        if t == 0:
            return [(20 + k, 0.7 if k < 2 else 0.3) for k in range(8)]           # drafts slots 0 and 1
        if t == 1:                                                               # slot 0 unsupported; drafts 2 alone
            return [(40, 0.95), (21, 0.95), (22, 0.7)] + [(20 + k, 0.3) for k in range(3, 8)]
        return [(20 + k, 0.95) for k in range(8)]

    tr = run(script, name="wino", tau_wide=0.6, tau_narrow=0.9)
    r1 = tr.records[1]
    assert r1.field("drafted") == 1 and revised(r1) == {}
    from engine.decoders.wino.policy import narrow_out
    weak = torch.tensor([0.05, 0.95, 0.0])
    assert narrow_out(weak, torch.tensor([True, True, False]), 0.9, accepted=2, last_accept=2).tolist() == [0]


def remasked_at_forward_1(seed: int, right, wrong) -> tuple[set, bool]:
    """Which of the first two slots forward 1 of a ReMDM decode seeded ``seed`` re-masks when their σ is ``right``
    (the decode's generator: forward 0's eight draws, then forward 1's), and whether σ ``wrong`` would re-mask
    another set."""
    from engine.runtime.sampling import make_generator
    g = make_generator(seed)
    torch.rand(8, dtype=torch.float64, generator=g)          # forward 0's draws
    u = torch.rand(8, dtype=torch.float64, generator=g).float()[:2]
    expected = {j for j in (0, 1) if u[j] < right[j]}
    return expected, expected != {j for j in (0, 1) if u[j] < wrong[j]}


def test_remdm_conf_weighs_a_token_by_its_probability_when_it_was_unmasked():
    """Forward 1 of 4: the two tokens written at forward 0 (p = 0.9, 0.8 then) go back with σ = softmax(−p at
    unmasking) (σ_max = 1); the model's current probabilities for them (0.45, 0.4) must not be used: over 40
    seeds the re-masked sets follow the unmask-time σ, and they would differ under the current one."""
    from engine.decoders.remdm.policy import sigma_conf
    first = [0.9, 0.8, 0.7, 0.6, 0.55, 0.5, 0.45, 0.4]
    later = first[::-1]
    right = sigma_conf(torch.tensor([0.9, 0.8]), 1, 4)
    wrong = sigma_conf(torch.tensor(later[:2]), 1, 4)
    differ = 0
    for seed in range(40):
        tr = run(lambda t: [(20 + k, (first if t == 0 else later)[k]) for k in range(8)], name="remdm", steps=4,
                 remask="conf", seed=seed, remdm_fill="confident")
        expected, differs = remasked_at_forward_1(seed, right, wrong)
        assert set(revised(tr.records[1])) == expected
        differ += differs
    assert differ > 0
