"""Branching a decode (engine.runtime.branch): resume from the state after step s, force a token, change the decoder."""

import pytest

from engine.harness.service import branch_generation
from engine.runtime.branch import Branch, canvas_after, parse_branch, resume_of
from engine.decoders import build_decoder
from engine.errors import ConfigError
from engine.runtime.loop import Generation
from engine.models.model import load_model
from engine.tasks import get_task
from engine.records.trace import Reason


@pytest.fixture(scope="module")
def small():
    return load_model("unmask-tasks-small", device="cpu")


def story(n=1, seed=3):
    return [p.prompt for p in get_task("story").problems("test", n, seed=seed)]


def branch(a, base, name, kw, step, force=None):
    res = resume_of(base, Branch(step, force), name, a.vocab_size)
    return Generation(a, base.meta.prompt, build_decoder(name, gen_length=32, **kw), resume=res).run()


def nfe_after(base, step) -> int:
    return base.nfe - (base.records[step - 1].nfe if step else 0)


CANVAS_ONLY = [("ar", {}), ("threshold", dict(tau=0.7, block_size=8)), ("eb", dict(block_size=8)),
               ("edit", dict(block_size=8, tau=0.7, post_steps=0)), ("subblock", dict(block_size=8, sub_block=4)),
               ("threshold", dict(tau=0.7, block_size=8, use_cache=False)),
               ("threshold", dict(tau=0.7, block_size=8, temperature=1.0, seed=4)), ("ar", dict(temperature=1.0)),
               ("edit", dict(block_size=8, tau=0.7, post_steps=0, temperature=1.0, seed=3))]


@pytest.mark.parametrize("name,kw", CANVAS_ONLY)
def test_a_branch_at_any_step_with_the_same_decoder_reproduces_the_run(small, name, kw):
    """A rule reading only the canvas and its dial, greedy or sampled (the branch goes on with the run's random
    stream): from step s + 1 on the same tokens and the same number of forwards after the rebuild, at every step."""
    base = Generation(small, story()[0], build_decoder(name, gen_length=32, **kw)).run()
    for s in range(len(base.records) + 1):
        br = branch(small, base, name, kw, s)
        assert br.meta.token_ids == base.meta.token_ids, s
        assert br.nfe - br.meta.branch["nfe_resume"] == nfe_after(base, s), s


@pytest.mark.parametrize("name,kw", [("llada", dict(block_size=8, steps=4)), ("s2d2", dict(block_size=8)),
                                     ("tspd", dict(block_size=8)), ("wino", dict(block_size=8)),
                                     ("klass", dict(block_size=8)), ("credit", dict(block_size=8)),
                                     ("simsd", dict(block_size=8)), ("remdm", dict(block_size=8, steps=4)),
                                     ("llada", dict(block_size=8, steps=4, remasking="random", temperature=1.0))])
def test_a_branch_at_a_block_boundary_reproduces_a_decoder_with_state_in_the_block(small, name, kw):
    """Their state within a block (quotas, trajectories, the router's span, KL history) starts fresh at the
    branch point: at a block's end that is where the run's own state started fresh too."""
    for prompt in story(2):
        base = Generation(small, prompt, build_decoder(name, gen_length=32, **kw)).run()
        ends = [i + 1 for i, r in enumerate(base.records)
                if i + 1 == len(base.records) or base.records[i + 1].block != r.block]
        for s in [0] + ends:
            br = branch(small, base, name, kw, s)
            assert br.meta.token_ids == base.meta.token_ids and \
                br.nfe - br.meta.branch["nfe_resume"] == nfe_after(base, s), (prompt, s)


def test_the_rebuild_is_one_forward_over_the_prompt_and_the_finished_blocks(small, monkeypatch):
    from engine.runtime import scheduler
    kw = dict(tau=0.7, block_size=8)
    base = Generation(small, story()[0], build_decoder("threshold", gen_length=32, **kw)).run()
    s = next(i + 1 for i, r in enumerate(base.records) if r.block >= 1)       # inside the second block
    seen, real = [], scheduler.run_round
    monkeypatch.setattr(scheduler, "run_round", lambda reqs: seen.append(len(reqs[0].ids)) or real(reqs))
    br = branch(small, base, "threshold", kw, s)
    m, B = base.meta, kw["block_size"]
    pos = canvas_after(base, s).index(m.mask_token_id)            # the first slot still masked after step s
    lo = m.prompt_len // B * B + (pos - m.prompt_len // B * B) // B * B     # its block, on the grid
    assert br.meta.branch["nfe_resume"] == 1 and br.records[0].kind == "resume" and seen[0] == lo
    assert all(q <= 2 * B for q in seen[1:])   # then a block against the cache (a new block's first forward also
    #                                            stores the finished one, fused), never the prefix again
    uncached = branch(small, base, "threshold", dict(kw, use_cache=False), s)
    assert uncached.meta.branch["nfe_resume"] == 0          # nothing to rebuild: every forward runs the prefix


def test_a_branch_that_names_another_seed_draws_its_own_stream(small):
    kw = dict(tau=0.7, block_size=8, temperature=1.0, seed=5)
    base = Generation(small, story()[0], build_decoder("threshold", gen_length=32, **kw)).run()
    assert any(r.has("rng_state") for r in base.records)     # sampled forwards keep where the stream stands
    greedy = Generation(small, story()[0], build_decoder("threshold", gen_length=32, tau=0.7, block_size=8)).run()
    assert not any(r.has("rng_state") for r in greedy.records)
    other = [branch(small, base, "threshold", dict(kw, seed=6), 1) for _ in range(2)]
    assert other[0].meta.token_ids == other[1].meta.token_ids                   # reproducible from its seed
    outs = {tuple(branch(small, base, "threshold", dict(kw, seed=k), 1).meta.token_ids) for k in range(6, 10)}
    assert len(outs) > 1                                      # and its own: other seeds, other futures


def test_forcing_the_next_commit_equals_not_forcing_it(small):
    """ar commits one token per forward: forcing, after step s, the token its step s + 1 committed gives the
    same answer with that forward saved."""
    base = Generation(small, story()[0], build_decoder("ar", gen_length=32)).run()
    for s in range(1, min(6, len(base.records) - 1)):
        nxt = base.records[s]
        pos = int(nxt.positions[nxt.committed][0])
        tok = int(nxt.tokens_after[nxt.committed][0])
        br = branch(small, base, "ar", {}, s, force=(pos, tok))
        assert br.meta.token_ids == base.meta.token_ids and br.nfe - br.meta.branch["nfe_resume"] == \
            nfe_after(base, s) - 1


def test_a_forced_token_stays_under_a_commit_once_decoder_and_is_recorded(small):
    kw = dict(tau=0.7, block_size=8)
    base = Generation(small, story()[0], build_decoder("threshold", gen_length=32, **kw)).run()
    canvas, m = canvas_after(base, 1), base.meta
    pos = next(i for i in range(m.prompt_len, m.gen_end) if canvas[i] == m.mask_token_id)
    tok = next(t for t in range(5, 60) if t not in (base.meta.final_tokens[pos], m.mask_token_id))
    br = branch(small, base, "threshold", kw, 1, force=(pos, tok))
    first = br.records[0]
    assert first.kind == "force" and int(first.reason[pos - first.positions[0]]) == Reason.FORCED
    assert br.meta.final_tokens[pos] == tok and br.meta.branch["force"] == [pos, tok]


def test_a_revising_decoder_may_rewrite_a_forced_token_and_its_history_shows_it(small):
    """edit with a low τ_edit rewrites a forced token the model disagrees with; the revision is in the trace."""
    kw = dict(tau=0.7, block_size=8, tau_edit=0.3)
    base = Generation(small, story()[0], build_decoder("edit", gen_length=32, **kw)).run()
    canvas, m = canvas_after(base, 1), base.meta
    rewritten = 0
    for pos in [i for i in range(m.prompt_len, m.gen_end) if canvas[i] == m.mask_token_id][:6]:
        tok = next(t for t in range(5, 60) if t not in (m.final_tokens[pos], m.mask_token_id))
        br = branch(small, base, "edit", kw, 1, force=(pos, tok))
        changes = [(p, old) for _, p, _, old, _ in br.revisions() if p == pos]
        if br.meta.final_tokens[pos] != tok:
            assert changes and changes[0][1] == tok               # rewritten from the forced token
            rewritten += 1
    assert rewritten >= 1


def test_another_decoder_from_the_branch_point_through_the_service():
    from engine.harness.service import DecodeService
    s = DecodeService(default_model="unmask-tasks-small", max_seconds=30)
    prompt, params = story()[0], dict(block_size=8, tau=0.7, gen_length=32)
    *_, tr = s.branch_stream(prompt, "threshold", params, None, '{"step": 1, "spec": "edit:block_size=8,tau=0.5"}')
    assert tr.meta.decoder == "edit" and tr.meta.branch["base_decoder"] == "threshold" and tr.meta.branch["step"] == 1
    assert tr.meta.params["gen_length"] == 32 and tr.meta.prompt == prompt


@pytest.mark.parametrize("value,match", [
    ("[1]", "has \"step\""), ('{"step": 1, "x": 2}', "nothing else"), ("{", "JSON object"),
    ('{"step": "1"}', "integer"), ('{"step": 1, "force": [1]}', "two integers"), ('{"step": 1, "spec": 3}', "SPEC"),
    ("x" * 5000, "at most")])
def test_a_malformed_branch_is_a_one_line_error(value, match):
    with pytest.raises(ConfigError, match=match):
        parse_branch(value)


def test_a_branch_that_does_not_fit_its_base_is_a_one_line_error(small):
    base = Generation(small, story()[0], build_decoder("threshold", gen_length=32, block_size=8)).run()
    m = base.meta
    for b, match in [(Branch(len(base.records) + 1), "step must be in"), (Branch(1, (0, 5)), "generated slot"),
                     (Branch(len(base.records), (m.prompt_len, 5)), "already decoded"),
                     (Branch(0, (m.prompt_len, m.mask_token_id)), "other than"),
                     (Branch(0, (m.prompt_len, small.vocab_size)), "other than")]:
        with pytest.raises(ConfigError, match=match):
            b.check(base, small.vocab_size)
    with pytest.raises(ConfigError, match="generation length"):
        branch_generation(small, base, '{"step": 1, "spec": "threshold:gen_length=16"}')


def test_a_deeply_nested_branch_is_one_line_not_a_recursion_error():
    from engine.errors import ConfigError
    from engine.runtime.branch import parse_branch
    with pytest.raises(ConfigError, match="nested deeper"):
        parse_branch('{"step": ' + "[" * 990 + "]" * 990 + "}")
    with pytest.raises(ConfigError, match="not list"):
        parse_branch({"step": [[[]]]})


def test_a_branch_of_a_branch_starts_where_its_base_stood(small):
    """Through the Python API: the second branch reads the first branch's canvas, which began at its own resume
    point (not from an all-masked canvas)."""
    from engine.harness.service import branch_generation
    from engine.runtime.branch import canvas_after
    kw = dict(tau=0.7, block_size=8)
    base = Generation(small, story()[0], build_decoder("threshold", gen_length=32, **kw)).run()
    first = branch_generation(small, base, {"step": 3, "spec": "ar"}).run()
    assert canvas_after(first, len(first.records)) == first.meta.final_tokens
    assert canvas_after(first, 0) == canvas_after(base, 3)
    second = branch_generation(small, first, {"step": 2}).run()
    masked = canvas_after(first, 2).count(base.meta.mask_token_id)
    assert second.meta.branch["canvas"] == canvas_after(first, 2) and masked < 32
