"""Token editing: LLaDA2.1's joint threshold (SGLang's ``JointThreshold``, diffusers' ``LLaDA2Pipeline``).

Each forward of a block reads one set of logits and applies two rules:
* mask to token (M2T): commit every masked slot whose candidate has p > τ (τ_mask); if none does, the most
  confident one;
* token to token (T2T): rewrite a slot written earlier in the block when the model's argmax differs from it with
  p > τ_edit (the edit's p is the untempered softmax of the argmax, as in the reference).
Once the block has no masks, up to ``post_steps`` more forwards make edits only; the block ends at the first
forward that changes nothing. The prompt's tail in the first block is never edited. With ``stop_at_eos`` (the
default) and post steps, the block that holds the stop token is filled and still gets its post steps, and the run
stops when that block ends: we follow SGLang's ``JointThreshold``, which runs them (diffusers' ``eos_early_stop``
skips them). Without post steps a decode stops at the stop token as the threshold rule does.

``check_next`` (ours, on by default): a block's first forward also recomputes the finished block before it (the
fused commit, or its store forward), so T2T is applied to that block too, at no extra forward; an edited block's
cached K/V are dropped and recomputed in the next forward, so the cache stays exact. The prototype found that
conflicts appear in the forward that fills a block's last masks, which only a later forward can see: the
reference pays a post-block forward per block for it, this pays none. The block before a stop token is checked
only by post steps.

Where we chose: at T > 0 the M2T candidate is the engine's sampled one (as the threshold rule), the edit stays the
argmax; and when the post steps are spent the block ends without another forward (the reference runs one more and
discards it; here the next block's first forward recomputes the block anyway).
"""

from __future__ import annotations

import torch

from engine.catalogue.catalogue import config_class
from engine.decoders.schedule import token_p
from engine.runtime.device import read
from engine.runtime.loop import BlockContext, Policy
from engine.records.trace import Reason, Revision


def edit_candidates(ctx: BlockContext, st, p_top: torch.Tensor, tau_edit: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(indices, p) of written slots whose argmax differs from their token with p > τ_edit, and p at every
    written slot (NaN elsewhere); ``p_top`` (L,): p of each slot's argmax (``token_p``), read."""
    written = ctx.written
    edit = written & (st.top1 != ctx.tokens) & (p_top > tau_edit)
    return edit.nonzero()[:, 0], torch.where(written, p_top, torch.full_like(p_top, float("nan")))


def mask_to_token(ctx: BlockContext, st, tau: float) -> torch.Tensor:
    """Masked slots with p > τ, else the most confident masked one."""
    masked = ctx.masked
    if not masked.any():
        return torch.zeros(0, dtype=torch.long)
    conf = torch.where(masked, st.confidence, torch.full_like(st.confidence, -1.0))
    chosen = masked & (conf > tau)
    if not chosen.any():
        chosen[int(conf.argmax())] = True
    return chosen.nonzero()[:, 0]


class EditPolicy(Policy):
    name = "edit"
    config_cls = config_class("edit")
    revises = True

    @property
    def settles_per_block(self) -> bool:
        """With post steps, the stop token is looked for when the block ends (its post steps run first)."""
        return self.cfg.post_steps > 0

    def run_block(self, ctx: BlockContext):
        cfg, post = self.cfg, 0
        while True:
            if not ctx.masked.any():
                if post >= cfg.post_steps:
                    return
                post += 1
            _, st = yield from ctx.draft()
            previous = self.previous_top(ctx) if ctx.step == 0 and cfg.check_next else None
            p_top, *previous = yield from read(token_p(st.probs, st.top1), *(previous or ()))   # one read
            if previous:
                self.edit_previous(ctx, *previous)
            edits, p_written = edit_candidates(ctx, st, p_top, cfg.tau_edit)   # the slots written before this forward
            fill = mask_to_token(ctx, st, cfg.tau)
            ctx.commit(fill, st.candidate[fill], Reason.THRESHOLD)
            ctx.revise(edits, st.top1[edits], Revision.EDIT)
            yield ctx.emit("draft", st, edit_p=p_written.numpy())
            if len(fill) == 0 and len(edits) == 0:
                return

    def previous_top(self, ctx: BlockContext) -> tuple | None:
        """The finished block before this one, from this first forward's recomputation of it: p and argmax (n,)
        each of its softmax, on the device (None where it was not recomputed)."""
        lo = max(ctx.runner.P, ctx.lo - ctx.runner.cfg.block_size)   # the whole block, even before a short one
        logits = ctx.runner.logits_of(lo, ctx.lo) if ctx.index > 0 and lo < ctx.lo else None
        if logits is None:
            return None
        probs = torch.softmax(ctx.runner.unmaskable(logits).double(), dim=-1)      # (n, V), as the reference
        return tuple(probs.max(-1))

    def edit_previous(self, ctx: BlockContext, p: torch.Tensor, top: torch.Tensor) -> None:
        """T2T on the finished block before this one (``previous_top``, read)."""
        lo = ctx.lo - len(p)
        tokens = ctx.runner.tokens[lo:ctx.lo]
        edit = (top != tokens) & (p > self.cfg.tau_edit)
        ctx.revise_previous(lo + edit.nonzero()[:, 0], top[edit])
