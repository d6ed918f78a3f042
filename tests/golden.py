"""Golden decodes: every decoder on a few held-out prompts of the embedded model, summarised record by record.

    python -m tests.golden write     # re-record tests/data/golden.json (only when a change is meant to alter results)
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
         "tspd:controller=heuristic,block_size=8", "tspd:ce=0,block_size=16", "tspd:temperature=1,seed=2"]


def summarise(trace) -> dict:
    recs = []
    for r in trace.records:
        recs.append(dict(kind=r.kind, block=r.block, committed=r.positions[r.committed].tolist(),
                         reason=r.reason.tolist(), conf=np.round(np.nan_to_num(r.confidence, nan=-1), 4).tolist(),
                         extra=sorted(r.extra)))
    m = trace.meta
    return dict(token_ids=m["token_ids"], nfe=m["nfe"], nfe_by_kind=m["nfe_by_kind"], records=recs)


def decode_all() -> dict:
    from engine.decoders import build_decoder, parse_spec
    from engine.loop import Generation
    from engine.model import load_model
    from engine.tasks import get_task
    adapter = load_model("tiny", device="cpu")
    prompts = [p.prompt for p in get_task("arith").problems("test", 3, seed=7)]
    out = {}
    for spec in SPECS:
        name, params = parse_spec(spec)
        out[spec] = [summarise(Generation(adapter, p, build_decoder(name, **params)).run()) for p in prompts]
    return out


if __name__ == "__main__" and sys.argv[1:] == ["write"]:
    GOLDEN.write_text(json.dumps(decode_all()))
    print(f"wrote {GOLDEN}")
