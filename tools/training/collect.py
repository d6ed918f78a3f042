"""Trajectories for fitting CE and training the TSPD controller, replayed from decode traces.

Every problem is first decoded by a conservative *reference* decoder (AR, or LLaDA with one token per step);
its tokens are the labels. The trajectories themselves come from the decoders TSPD will be compared with and from
TSPD itself (on-policy, ``rollouts``). Only the task's train / val splits are ever used, never test.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.decoders.tspd.features import Trajectories
from engine.decoders.tspd.kalman import logit
from engine.decoders import build_decoder
from engine.runtime.jobs import run_batched
from engine.runtime.loop import Generation
from engine.records.trace import Reason


@dataclass
class Rows:
    features: np.ndarray   # (n, 14)
    label: np.ndarray      # (n,) 1 if the candidate equals the reference's token
    prompt: np.ndarray     # (n,) index of the problem (for splitting)

    @staticmethod
    def concat(parts: list["Rows"]) -> "Rows":
        return Rows(*(np.concatenate([getattr(p, k) for p in parts]) for k in ("features", "label", "prompt")))


def replay(trace, window: int = 4):
    """Yield per block: (feature rows (s, L, 14), masked (s, L), candidates (s, L), z (s, L), flipped (s, L))."""
    mask_id = trace.meta.mask_token_id
    B = int(trace.meta.block_size)
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


def controller_rows(traces, refs=None, window: int = 4) -> Rows:
    """Rows of every masked position at every draft forward; positive when the candidate equals the reference's
    token there (``refs`` default: each trace is its own reference). Positions after the reference's first stop
    token are left out: they are trivially positive."""
    feats, labels, prompt = [], [], []
    for i, (tr, ref) in enumerate(zip(traces, refs or traces)):
        final = np.array(ref.meta.final_tokens)
        stops = [j for j in range(ref.meta.prompt_len, len(final)) if final[j] in ref.meta.stop_ids]
        eos = stops[0] if stops else len(final)
        for positions, d in replay(tr, window):
            keep = d["m"] & (positions[None, :] <= eos)
            feats.append(d["f"][keep])
            labels.append((d["c"] == final[np.minimum(positions, len(final) - 1)][None, :])[keep])
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


@dataclass
class Split:
    """Problems of one split, each with its block size and its reference decode."""
    problems: list
    blocks: list
    refs: list


def reference_policy(name: str, B: int, gen_length: int = 64):
    """The conservative reference: ``ar`` (one token per forward, left to right) or ``llada`` (one per step)."""
    if name == "ar":
        return build_decoder("ar", gen_length=gen_length)
    return build_decoder("llada", block_size=B, steps=B, gen_length=gen_length)


def reference_split(adapter, task, split: str, n: int, block_sizes=(16, 8), seed: int = 0,
                    gen_length: int = 64, reference: str = "llada") -> Split:
    problems = task.problems(split, n, seed=seed)
    blocks = [block_sizes[i % len(block_sizes)] for i in range(len(problems))]
    refs = decode_all(adapter, [(p.prompt, reference_policy(reference, B, gen_length))
                                for p, B in zip(problems, blocks)])
    return Split(problems, blocks, refs)


def rollouts(adapter, split: Split, make_policy) -> list:
    """One decode of every problem of the split by ``make_policy(block_size)``."""
    return decode_all(adapter, [(p.prompt, make_policy(B)) for p, B in zip(split.problems, split.blocks)])


def decode_all(adapter, jobs: list[tuple]) -> list:
    """The traces of (prompt, policy) decodes, in order, sharing the engine loop's rounds (as many at once as it
    runs): each decode's tokens are its own whatever its company, and a CPU serves a round of many small decodes
    in a few times one decode's forward."""
    return run_batched([lambda p=p, pol=pol: Generation(adapter, p, pol).requests() for p, pol in jobs],
                       len(jobs))


def lookahead_counts(trace, reference_final) -> tuple[int, int, int]:
    """(commits, commits made by CE's look-ahead, those whose token differs from the reference's there)."""
    commits = fired = wrong = 0
    for r in trace.records:
        commits += r.n_committed
        for j in np.flatnonzero(r.reason == Reason.CE_LOOKAHEAD):
            pos = int(r.positions[j])
            fired += 1
            wrong += pos < len(reference_final) and int(r.tokens_after[j]) != reference_final[pos]
    return commits, fired, wrong
