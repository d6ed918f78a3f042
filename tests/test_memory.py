"""The byte ledger (engine/models/memory.py): what each decode keeps on the device between its forwards, counted
exactly (against every live tensor as wide as the vocabulary); 64 decodes of KLASS, TSPD + CE and LLaDA at LLaDA's
vocabulary (126 464) under a budget, the engine seating only what fits; a paused decode's slot cache counted, so
``UNMASK_PAUSED_MB`` limits pausing on the static path; an idle bucket freed."""

from __future__ import annotations

import gc
from types import SimpleNamespace

import pytest
import torch

from engine.decoders import build_decoder, parse_spec
from engine.errors import UserError
from engine.models import static
from engine.models.model import load_model
from engine.runtime import share
from engine.runtime.device import read_back
from engine.runtime.engine_loop import Job
from engine.runtime.jobs import configure
from engine.runtime.loop import Generation
from engine.models.memory import LEDGER, decode_need, kept_need, stats_reserve
from engine.runtime.scheduler import Forward, run_round
from engine.tasks import get_task
from tests.families import write_llada

V = 126_464
PROMPT = get_task("arith").problems("test", 1, seed=3)[0].prompt
SPECS = ["klass:block_size=4,gen_length=4", "tspd:controller=heuristic,block_size=4,gen_length=4",
         "llada:block_size=4,steps=4,gen_length=4"]


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """A tiny random LLaDA whose output layer is LLaDA's width."""
    return load_model(str(write_llada(tmp_path_factory.mktemp("wide") / "m", vocab=V)[0]), device="cpu")


def gen(model, spec: str, prompt=PROMPT) -> Generation:
    name, params = parse_spec(spec)
    return Generation(model, prompt, build_decoder(name, **params))


def alive_wide() -> int:
    """Bytes of every live tensor as wide as the vocabulary (logits, distributions), the model's weights aside."""
    gc.collect()
    wide = [t for t in gc.get_objects() if isinstance(t, torch.Tensor) and not isinstance(t, torch.nn.Parameter)
            and t.dim() and t.shape[-1] == V]
    return sum({t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in wide}.values())


@pytest.mark.parametrize("spec", SPECS, ids=[s.split(":")[0] for s in SPECS])
def test_the_ledger_counts_what_a_decode_keeps_between_forwards(wide, spec):
    """Driven forward by forward: between two forwards the ledger's count of the decode equals the bytes of every
    live vocabulary-wide tensor, and stays within the need known before it started."""
    g = gen(wide, spec)
    bound, seen = kept_need(g.runner), []
    decode, result = g.requests(), None
    while True:
        sent, result = result, None                  # the test holds no result of its own past the send
        try:
            req = decode.send(sent)
        except StopIteration:
            break
        finally:
            del sent
        if isinstance(req, Forward):                 # the decode waits for its next round: what it keeps now
            counted = LEDGER.owned("decodes", g.runner)
            assert counted == alive_wide() and counted <= bound, (counted, bound)
            seen.append(counted)
            result = run_round([req])[0]
        else:
            result = read_back([req.tensors])[0]
    assert LEDGER.owned("decodes", g.runner) == 0 and alive_wide() == 0     # released at its end
    if spec.startswith("llada"):
        assert max(seen) == 0                        # no (n, V) logits kept for a rule that never reads them
    else:
        assert max(seen) > 0


@pytest.mark.parametrize("end", ["aborted", "failed"])
def test_a_decode_ended_early_releases_what_it_kept(wide, end):
    """A KLASS decode stopped mid-block (a Stop or its budget close it at a yield; a failure is thrown into it)
    lets go of its previous distributions and leaves the byte ledger at once, not when it is collected."""
    g = gen(wide, "klass:block_size=4,gen_length=4,kl_history=1")
    decode, result = g.requests(), None
    while not LEDGER.owned("decodes", g.runner):     # on to a forward whose predecessor's p_prev is kept
        req = decode.send(result)
        result = run_round([req])[0] if isinstance(req, Forward) else read_back([req.tensors])[0]
    assert g.policy.kept()[0] is not None
    if end == "aborted":
        decode.close()
    else:
        with pytest.raises(RuntimeError, match="a forward failed"):
            decode.throw(RuntimeError("a forward failed"))
    assert LEDGER.owned("decodes", g.runner) == 0 and g.policy.kept() == [None]
    assert id(g.runner) not in LEDGER.entries.get("decodes", {})


def test_64_decodes_stay_under_the_budget(wide, monkeypatch):
    """64 decodes (KLASS, TSPD + CE, LLaDA, short) submitted at once under a budget of eight decodes' needs: the
    engine seats what fits, every decode ends with its solo tokens, and the ledger's peak (every account with the
    running round's bytes) stays within the budget. At a real length (256 tokens, blocks of 32) the needs of 64
    decodes fit a quarter of an 80 GB GPU."""
    short = ["klass:block_size=2,gen_length=2,kl_history=1", "tspd:controller=heuristic,block_size=2,gen_length=2",
             "llada:block_size=2,steps=2,gen_length=2"]
    solo = {s: gen(wide, s).run().meta.token_ids for s in short}
    need = max(decode_need(gen(wide, s).runner) for s in short)
    monkeypatch.setattr(LEDGER, "budget", lambda: 8 * need + stats_reserve("cpu"))
    LEDGER.peak = 0
    gens = [gen(wide, short[i % 3]) for i in range(64)]
    loop = configure(max_running=64, round_tokens=1 << 20)
    handles = loop.submit_many([Job(g.requests, need=decode_need(g.runner)) for g in gens])
    for i, h in enumerate(handles):
        assert h.result(timeout=300).meta.token_ids == solo[short[i % 3]]
    assert 0 < LEDGER.peak <= 8 * need + stats_reserve("cpu")
    real = [gen(wide, s.replace("gen_length=4", "gen_length=256").replace("block_size=4", "block_size=32"))
            for s in SPECS]
    assert sum(decode_need(g.runner) for g in real) * 64 / 3 + stats_reserve("cuda") <= 80e9 / 4


def test_a_decode_that_alone_passes_the_budget_is_refused(wide, monkeypatch):
    g = gen(wide, SPECS[0])
    monkeypatch.setattr(LEDGER, "budget", lambda: decode_need(g.runner) // 2)     # half its need, reserve aside
    h = configure(max_running=4).submit(Job(g.requests, need=decode_need(g.runner)))
    with pytest.raises(UserError, match="MiB of device memory at once"):
        h.result(timeout=60)


def test_the_statistics_reserve_is_the_rounds_rows_up_to_one_chunk():
    """One 32-row decode at LLaDA's vocabulary sets aside its own temporaries (154 MiB), so a small
    UNMASK_STATIC_MB (2048) still has room once its first round ran; a round past the chunk sets aside the chunk."""
    from engine.models.memory import DEVICE_CHUNK, STATS_TEMPORARIES, scored_elements
    adapter = SimpleNamespace(vocab_size=V)
    scored = SimpleNamespace(ids=list(range(40)), rows=slice(8, None), sampling=object(), adapter=adapter)
    unscored = SimpleNamespace(ids=list(range(40)), rows=slice(8, None), sampling=None, adapter=adapter)
    call = SimpleNamespace(fn=print, args=())
    assert scored_elements([scored, unscored, call]) == 32 * V
    one = stats_reserve("cuda:0", scored_elements([scored]))
    assert one == STATS_TEMPORARIES * 8 * 32 * V and one / 2 ** 20 < 155 < 2048
    assert stats_reserve("cuda", scored_elements([scored] * 40)) == stats_reserve("cuda") == \
        STATS_TEMPORARIES * 8 * DEVICE_CHUNK
    assert stats_reserve("cpu", 40 * V) == stats_reserve("cpu")            # past the CPU's chunk: the chunk


def first_request(g: Generation):
    decode = g.requests()
    return SimpleNamespace(decode=decode, request=decode.send(None))


def test_a_paused_slot_cache_decode_counts_and_the_limit_holds(monkeypatch):
    """On the static path a decode's K/V is a row of a slot pool: ``held_bytes`` counts that row (it counted 0),
    so ``UNMASK_PAUSED_MB`` keeps a decode from pausing once the paused ones' rows pass it."""
    monkeypatch.setenv("UNMASK_STATIC", "on")
    tiny = load_model("tiny", device="cpu")
    a, b = (first_request(gen(tiny, "threshold:block_size=8")) for _ in range(2))
    row = a.request.cache.pool.row_bytes()
    assert row > 0 and share.held_bytes(a) >= row
    monkeypatch.setenv("UNMASK_PAUSED_MB", "0")
    loop = SimpleNamespace(running=[a, b], paused=[])
    assert not share.pause(loop, a) and loop.paused == []
    monkeypatch.setenv("UNMASK_PAUSED_MB", "1024")
    assert share.pause(loop, a) and loop.paused == [a]


def test_an_idle_bucket_is_freed(monkeypatch):
    """A bucket without a pool that no round used for ``IDLE_ROUNDS`` rounds goes, its buffers with it."""
    monkeypatch.setenv("UNMASK_STATIC", "on")
    monkeypatch.setattr(static, "IDLE_ROUNDS", 1)
    tiny = load_model("tiny", device="cpu")
    path = static.StaticPath.of(tiny)
    gen(tiny, "threshold:block_size=8,gen_length=8,use_cache=0").run()
    first = set(path.buckets)
    assert first and LEDGER.accounts()["buckets"] > 0
    long = get_task("arith").problems("test", 1, seed=9)[0].prompt * 4      # other query shapes
    gen(tiny, "threshold:block_size=8,gen_length=8,use_cache=0", long).run()
    assert first - set(path.buckets), (first, set(path.buckets))


def test_a_small_budget_is_not_refused_for_good_after_the_first_round(wide, monkeypatch):
    """UNMASK_STATIC_MB=2048 on an accelerator (its chunk: 2.5 GiB of statistics temporaries at most): the first
    decode runs, and so does the next, whose need is far within the budget (a fixed one-chunk reserve refused it,
    "leaves -512 MiB"); the reserve is the round's scored rows, under a chunk."""
    from engine.models import memory
    monkeypatch.setenv("UNMASK_STATIC_MB", "2048")
    monkeypatch.setattr(memory, "chunk_limit", lambda device: memory.DEVICE_CHUNK)    # as on "cuda"
    loop = configure(max_running=4)
    for _ in range(2):
        g = gen(wide, SPECS[0])
        assert loop.submit(Job(g.requests, need=decode_need(g.runner))).result(timeout=120) is not None
    assert 0 < loop.round_reserve < 2 ** 30
