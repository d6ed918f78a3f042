"""Golden decodes: every decoder on a few held-out prompts of the embedded model, summarised record by record.

    python -m tests.golden write     # re-record tests/data/golden.json (only when a change is meant to alter results)
    python -m tests.golden add       # record only the specs it lacks (a new decoder)
    python -m tests.golden rewrite remdm klass   # re-record only the named decoders' specs (a changed default)
A refactor must reproduce these token for token, reason for reason, NFE for NFE (tests/test_golden.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

GOLDEN = Path(__file__).resolve().parent / "data" / "golden.json"
SPECS = ["ar", "llada:block_size=8,steps=8", "llada:block_size=8,steps=4,remasking=random,temperature=1,seed=3",
         "threshold:tau=0.9,block_size=8", "threshold:rule=sdar,tau=0.7,block_size=16,steps=4",
         "threshold:tau=0.8,block_size=4,fuse_commit=0", "threshold:tau=0.9,block_size=8,use_cache=0",
         "s2d2:preset=sdar-a", "s2d2:router=ucb,block_size=8,temperature=1,seed=5",
         "s2d2:router=always,acceptance=greedy,block_size=8", "s2d2:router=hysteresis,block_size=16",
         "s2d2:router=score,score_type=dynamic,estimator=margin,block_size=8", "tspd",
         "tspd:controller=heuristic,block_size=8", "tspd:ce=0,block_size=16", "tspd:temperature=1,seed=2",
         # every other decoder: greedy and seeded, with and without the block cache
         "edit:block_size=8,post_steps=1", "edit:block_size=4,temperature=1,seed=4,use_cache=0",
         "wino:block_size=8", "wino:block_size=8,temperature=1,seed=6,use_cache=0",
         "remdm:block_size=8,steps=4", "remdm:block_size=8,steps=8,eta=0.3,temperature=1,seed=7,use_cache=0",
         "eb:block_size=8", "eb:block_size=16,entropy_bound=1,temperature=1,seed=8,use_cache=0",
         "subblock:block_size=8,sub_block=4", "subblock:block_size=8,sub_block=2,temperature=1,seed=9,use_cache=0",
         "ar:use_cache=0",
         # the decoders in their own folders (engine/decoders/<name>/)
         "prophet:block_size=8", "prophet:block_size=8,gap_scale=2,temperature=1,seed=10,use_cache=0",
         "klass:block_size=8", "klass:block_size=8,kl_history=1,temperature=1,seed=11,use_cache=0",
         "credit:block_size=8", "credit:block_size=8,tau=0.7,temperature=1,seed=12,use_cache=0"]
# decoders that need another kind of model: (model, spec); "dream" is a seeded random Dream-style checkpoint
OTHER_SPECS = [("unmask-tasks-small", "simsd:block_size=8"),
               ("unmask-tasks-small", "simsd:block_size=8,acceptance=mrs,temperature=1,seed=2,use_cache=0"),
               ("unmask-uniform-small", "uniform"), ("unmask-uniform-small", "uniform:seed=3"),
               ("dream", "dream:gen_length=16,steps=8"), ("dream", "dream:gen_length=16,steps=8,temperature=1,seed=1"),
               # the rivals on a full-attention model: Prophet's exit fills the canvas, KLASS's history spans blocks
               ("dream", "prophet:gen_length=16,block_size=4,gap_scale=0"),
               ("dream", "klass:gen_length=16,block_size=4,kl_eps=10,tau=0.01")]


def summarise(trace) -> dict:
    recs = []
    for r in trace.records:
        recs.append(dict(kind=r.kind, block=r.block, committed=r.positions[r.committed].tolist(),
                         reason=r.reason.tolist(), conf=np.round(np.nan_to_num(r.confidence, nan=-1), 4).tolist(),
                         extra=sorted(k for k in r.extra if k != "rng_state")))   # bookkeeping, not output
    m = trace.meta
    return dict(token_ids=m.token_ids, nfe=m.nfe, nfe_by_kind=m.nfe_by_kind, records=recs)


def decode_all(only: tuple[str, ...] = ()) -> dict:
    from engine.decoders import build_decoder, parse_spec
    from engine.runtime.loop import Generation
    from engine.models.model import load_model
    from engine.tasks import get_task
    models = {"tiny": load_model("tiny", device="cpu")}
    prompts = [p.prompt for p in get_task("arith").problems("test", 3, seed=7)]
    stories = [p.prompt for p in get_task("story").problems("test", 2, seed=7)]
    out = {}
    for model, spec in [("tiny", s) for s in SPECS] + OTHER_SPECS:
        if only and spec.split(":")[0] not in only:
            continue
        if model not in models:
            models[model] = dream_model() if model == "dream" else load_model(model, device="cpu")
        name, params = parse_spec(spec)
        on = stories if model == "unmask-tasks-small" else prompts
        out[key(model, spec)] = [summarise(Generation(models[model], p, build_decoder(name, **params)).run())
                                 for p in on]
    return out


def key(model: str, spec: str) -> str:
    return spec if model == "tiny" else f"{model}/{spec}"


def dream_model():
    """A seeded random Dream-style checkpoint (the same weights on every machine: tests/families.py)."""
    import tempfile

    from engine.models.model import load_model
    from tests.families import write_qwen2_family
    path = write_qwen2_family(Path(tempfile.mkdtemp()) / "dream", "Dream", seed=0)
    return load_model(str(path), device="cpu")


ALL = SPECS + [key(m, s) for m, s in OTHER_SPECS]


if __name__ == "__main__" and sys.argv[1:2] == ["rewrite"] and sys.argv[2:]:
    GOLDEN.write_text(json.dumps({**json.loads(GOLDEN.read_text()), **decode_all(tuple(sys.argv[2:]))}))
    print(f"re-recorded {', '.join(sys.argv[2:])} in {GOLDEN}")
elif __name__ == "__main__" and sys.argv[1:] in (["write"], ["add"]):
    # add: record only the specs the file lacks (a new decoder), keeping every recorded decode as it is
    have = json.loads(GOLDEN.read_text()) if sys.argv[1] == "add" else {}
    GOLDEN.write_text(json.dumps({**decode_all(), **have}))
    print(f"wrote {GOLDEN}")
