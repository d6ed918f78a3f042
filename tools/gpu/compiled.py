"""The compiled forward on a GPU (engine/models/compiled.py): the static path's buckets eager and compiled, on a
shaped model of a few layers (a cold compile of the 8B shape's 32 layers takes minutes of a short lease)."""

from __future__ import annotations

import numpy as np
import torch

from tools.bench.clock import median_ms
from tools.bench.settings import under
from tools.experiments.compiled import compile_seconds, settle
from tools.gpu.common import COMPILED, HBM_BYTES_PER_S, STATIC, decode


def gpu_rows(adapter, prompt, spec: str, reps: int) -> dict:
    """The compiled forward on the GPU (``UNMASK_COMPILE=on``): per forward at batch 1 and 12 over 32
    rows, the static path (graphs where CUDA) eager and compiled: ms per forward against the weight-read bound, the
    share of rows whose argmax changed and the largest logit difference; then ``spec`` decoded both ways (token
    agreement) and each bucket's first-compile time. A CPU run (``--tiny``) has no graphs and no bound."""
    from engine.models.compiled import Compiled
    from engine.models.static import StaticPath
    from engine.runtime.scheduler import Forward
    eager = lambda fn, *a: under(STATIC, fn, *a)                                                 # noqa: E731
    comp = lambda fn, *a: under(COMPILED, fn, *a)                                                # noqa: E731
    weight_bytes = sum(p.numel() * p.element_size() for p in adapter.model.parameters())
    rows = []
    for batch in (1, 12):
        ids = torch.randint(0, min(500, adapter.vocab_size), (batch, 32))
        reqs = [Forward(adapter, ids[b], np.ones((32, 32), dtype=bool), np.arange(32), None) for b in range(batch)]
        out = {}
        for label, env in (("eager", eager), ("compiled", comp)):
            adapter.__dict__.pop("_static", None)              # a fresh bucket: its graph captures this mode's call
            env(lambda: StaticPath.of(adapter).run(reqs))
            if label == "compiled":
                env(Compiled.of, adapter).wait()
            logits, how = env(lambda: StaticPath.of(adapter).run(reqs))
            path = env(StaticPath.of, adapter)
            out[label] = dict(ms=env(median_ms, lambda: path.run(reqs), reps), how=how,
                              logits=torch.cat([x.float().cpu() for x in logits]))
        e, c = out["eager"].pop("logits"), out["compiled"].pop("logits")
        rows.append(dict(batch=batch, rows=32, eager=out["eager"], compiled=out["compiled"],
                         bound_ms=1e3 * weight_bytes / HBM_BYTES_PER_S if adapter.device.type == "cuda" else None,
                         argmax_changed=float((e.argmax(-1) != c.argmax(-1)).float().mean()),
                         max_logit_diff=float((e - c).abs().max())))
    adapter.__dict__.pop("_static", None)
    d_e = eager(decode, adapter, prompt, spec)
    comp(settle, adapter, lambda: decode(adapter, prompt, spec))     # every bucket the decode meets compiled first
    d_c = comp(decode, adapter, prompt, spec)
    agree = sum(a == b for a, b in zip(d_e["ids"], d_c["ids"])) / max(1, len(d_e["ids"]))
    return dict(forward=rows, decode=dict(spec=spec, token_agreement=agree, compiled_path=d_c["path"],
                                          eager_tokens_per_s=d_e["tokens_per_s"],
                                          compiled_tokens_per_s=d_c["tokens_per_s"]),
                compile_s=compile_seconds(adapter))
