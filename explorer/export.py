"""Export a trace as JSON (metadata + per-step summary), CSV (one row per step and scored position of the generated
span), npz, or an animated GIF of the decode (``explorer.gif``)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np

from explorer.gif import decode_gif
from explorer.store import canonical_key


def to_json(trace) -> str:
    meta = {k: v for k, v in trace.meta.to_dict().items() if k != "vocab"}
    steps = [dict(step=s, block=r.block, step_in_block=r.step_in_block, kind=r.kind, nfe=r.nfe,
                  wall_ms=round(r.wall_ms, 3), committed_positions=[int(p) for p in r.positions[r.committed]],
                  committed_tokens=[trace.token_str(int(t)) for t in r.tokens_after[r.committed]],
                  **{k: v for k, v in r.extra.items() if not isinstance(v, np.ndarray)})
             for s, r in enumerate(trace.records)]
    return json.dumps(dict(meta=meta, steps=steps), default=lambda o: o.item() if hasattr(o, "item") else str(o))


def to_csv(trace) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["step", "block", "kind", "position", "token_before", "token_after", "candidate", "confidence",
                "margin", "entropy", "committed", "reason"])
    start = trace.meta.prompt_len
    for s, r in enumerate(trace.records):
        for j, pos in enumerate(r.positions):
            if pos < start:         # a first block that starts inside the prompt scores the prompt's own slots too
                continue
            w.writerow([s, r.block, r.kind, int(pos), trace.token_str(r.tokens_before[j]),
                        trace.token_str(r.tokens_after[j]),
                        trace.token_str(r.candidate[j]) if r.candidate[j] >= 0 else "",
                        f"{r.confidence[j]:.6g}", f"{r.margin[j]:.6g}", f"{r.entropy[j]:.6g}",
                        int(r.committed[j]), int(r.reason[j])])
    return buf.getvalue()


def stem_of(trace, directory: Path) -> Path:
    """A content-addressed file stem in the app's own export directory (created 0700)."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    digest = canonical_key(t=trace.meta.final_tokens, p=trace.meta.params)[:10]
    return directory / f"unmask-{trace.meta.decoder}-{digest}"


def export_files(trace, directory: Path) -> list[str]:
    """Write the trace as JSON, CSV and npz (each well under a second); returns the paths."""
    stem = stem_of(trace, directory)
    paths = [stem.with_suffix(s) for s in (".json", ".csv", ".npz")]
    paths[0].write_text(to_json(trace))
    paths[1].write_text(to_csv(trace))
    trace.save(paths[2])
    return [str(p) for p in paths]


def export_gif(trace, directory: Path, budget_s: float | None = None, should_stop=None) -> str | None:
    """The animated GIF (``explorer.gif``; seconds for a long run, so made only on request, within a budget); None
    when ``should_stop()`` ended it."""
    data = decode_gif(trace, budget_s=budget_s, should_stop=should_stop)
    if data is None:
        return None
    path = stem_of(trace, directory).with_suffix(".gif")
    path.write_bytes(data)
    return str(path)
