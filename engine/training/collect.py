"""Trajectories for fitting CE and training the TSPD controller, replayed from traces of a conservative decoder.

The conservative decoder is LLaDA with one token per step (steps = B): every position stays masked, and so
observed, for as long as possible. Only the task's train / val splits are ever used, never test.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.ce.features import Trajectories
from engine.ce.kalman import logit


@dataclass
class Rows:
    features: np.ndarray   # (n, 14)
    label: np.ndarray      # (n,) 1 if the candidate equals the final token
    prompt: np.ndarray     # (n,) index of the problem (for splitting)


def replay(trace, window: int = 4):
    """Yield per block: (feature rows (s, L, 14), masked (s, L), candidates (s, L), z (s, L), flipped (s, L))."""
    mask_id = trace.meta["mask_token_id"]
    B = int(trace.meta["block_size"])
    by_block: dict[int, list] = {}
    for r in trace.records:
        if r.kind == "draft":
            by_block.setdefault(r.block, []).append(r)
    for recs in by_block.values():
        L = len(recs[0].positions)
        traj = Trajectories(L, window)
        out = {k: [] for k in ("f", "m", "c", "z", "fl")}
        for r in recs:
            masked = r.tokens_before == mask_id
            traj.push(masked, r.confidence, r.entropy, r.margin, r.candidate)
            out["f"].append(traj.features(~masked, B))
            out["m"].append(masked)
            out["c"].append(np.asarray(r.candidate))
            out["z"].append(logit(r.confidence))
            out["fl"].append(traj.flipped.copy())
        yield recs[0].positions, {k: np.stack(v) for k, v in out.items()}


def controller_rows(traces, window: int = 4) -> Rows:
    feats, labels, prompt = [], [], []
    for i, tr in enumerate(traces):
        final = np.array(tr.meta["final_tokens"])
        stops = [j for j in range(tr.meta["prompt_len"], len(final)) if final[j] in tr.meta["stop_ids"]]
        eos = stops[0] if stops else len(final)
        for positions, d in replay(tr, window):
            keep = d["m"] & (positions[None, :] <= eos)      # after the first EOS is trivially positive
            feats.append(d["f"][keep])
            labels.append((d["c"] == final[positions][None, :])[keep])
            prompt.append(np.full(int(keep.sum()), i))
    return Rows(np.concatenate(feats), np.concatenate(labels).astype(np.float32), np.concatenate(prompt))


def z_series(traces, window: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """Padded (n, T) logit-confidence trajectories of masked positions (NaN after commit) and flip flags."""
    series, flips = [], []
    for tr in traces:
        for _, d in replay(tr, window):
            for j in range(d["m"].shape[1]):
                live = d["m"][:, j]
                if live.sum() >= 2:
                    series.append(d["z"][live, j])
                    flips.append(d["fl"][live, j])
    T = max(len(s) for s in series)
    Z = np.full((len(series), T), np.nan)
    F = np.zeros((len(series), T), bool)
    for i, (s, f) in enumerate(zip(series, flips)):
        Z[i, :len(s)], F[i, :len(f)] = s, f
    return Z, F


def conservative_traces(adapter, task, split: str, n: int, block_sizes=(8, 16), seed: int = 0, gen_length: int = 64):
    from engine.decoders import build_decoder
    from engine.loop import Generation

    traces = []
    for i, prob in enumerate(task.problems(split, n, seed=seed)):
        B = block_sizes[i % len(block_sizes)]
        pol = build_decoder("llada", block_size=B, steps=B, gen_length=gen_length)
        traces.append(Generation(adapter, prob.prompt, pol).run())
    return traces
