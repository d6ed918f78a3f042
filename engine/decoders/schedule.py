"""Helpers the commit rules share: per-step quotas, top-k over the still-masked positions, and the probability the
model gives each slot's token (what the revising rules judge a written token by)."""

from __future__ import annotations

import torch

from engine.runtime.device import to_device


def transfer_schedule(n_masked: int, steps: int) -> list[int]:
    """Split n_masked commits over `steps` steps evenly, remainder front-loaded: k_j = n//S + [j < n % S]."""
    steps = max(1, min(steps, n_masked)) if n_masked else 1
    return [n_masked // steps + (1 if j < n_masked % steps else 0) for j in range(steps)]


def block_schedule(block_size: int, steps: int) -> list[int]:
    """SDAR's ``get_num_transfer_tokens(block_length, steps)``: the quota is scheduled over the block size B, not
    over the slots still masked, so a first block holding the prompt's tail fills its slots in fewer steps.
    Unlike the reference, steps > B is capped at B (the reference would schedule steps with quota 0)."""
    return transfer_schedule(block_size, steps)


def quota_at(schedule: list[int], step: int) -> int:
    """The quota of step `step`; steps past the schedule keep its last quota."""
    return schedule[min(step, len(schedule) - 1)]


def masked_topk(score: torch.Tensor, masked: torch.Tensor, k: int) -> torch.Tensor:
    """Sorted block-relative indices of the k best-scored masked positions (k is capped at the masked count)."""
    s = torch.where(masked, score, float("-inf"))
    return torch.topk(s, min(k, int(masked.sum()))).indices.sort().values


def token_p(probs: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """(L,) float on ``probs``' device: probs (L, V) at each slot's token (tokens (L,) on the host or the device;
    [MASK] slots read a harmless column), for the rule to read with the round's others (``device.read``)."""
    return probs.gather(-1, to_device(tokens[:, None].clamp_min(0), probs))[:, 0].float()
