"""Fast-dLLM v2's sub-block decoding (Wu et al., 2025; its ``generate`` with ``small_block_size``).

A block of ``block_size`` (the model's ``bd_size``) is cut into sub-blocks of ``sub_block`` slots, counted from the
block's start. They are decoded left to right: each forward runs the whole block against the cache of the finished
blocks, and commits, inside the current sub-block only, every masked slot with p > τ (strictly) and the most
confident masked slot always. With ``block_cache`` (Fast-dLLM v2's second cache level, ``use_block_cache``), a
sub-block whose first slot is decided runs its rows alone against the block's other K/V from the latest whole-block
forward (stale), spliced in position order; a sub-block whose first slot is masked runs the whole block, which
refreshes them. On a right-shifted model the block's first slot is predicted by the last row of the
finished block before it: Fast-dLLM v2 takes it by argmax from the forward that stores that block's K/V, before
any draft of the new block, so here the block's first forward commits that slot alone (Unmask fuses the store
forward into it: the same logit, the same forward count).

At T > 0 a slot's candidate and confidence follow Fast-dLLM v2's ``sample_with_top_p``: the logits divided by T,
their softmax cut to the top-p nucleus (top_p 0.95 by default, as there) and renormalised, one multinomial draw per
slot, and the confidence the threshold reads is that renormalised tempered probability of the draw (the engine's
shared sampler filters before the temperature and reports the untempered p).
"""

from __future__ import annotations

import torch

from engine.catalogue.catalogue import config_class
from engine.runtime.loop import BlockContext, Policy
from engine.runtime.device import read
from engine.runtime.sampling import TOP_K, race, stats_on_device, unpack
from engine.records.trace import Reason


def sub_block_commit(conf: torch.Tensor, masked: torch.Tensor, lo: int, hi: int, tau: float):
    """(slots with p > τ, the most confident slot) among the masked slots of [lo, hi) of the block."""
    inside = torch.zeros_like(masked)
    inside[lo:hi] = True
    live = masked & inside
    best = int(torch.where(live, conf, torch.full_like(conf, float("-inf"))).argmax())
    above = live & (conf > tau)
    above[best] = False
    return above.nonzero()[:, 0], best


def v2_sample(logits: torch.Tensor, temperature: float, top_p: float,
              generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Fast-dLLM v2's sampler on (q, V) logits, on their device with the decode's device generator: (samples (q,),
    their renormalised tempered p (q,)) there (``multinomial``'s own draw: ``race``)."""
    probs = torch.softmax(logits.double() / temperature, dim=-1)
    sorted_p, order = torch.sort(probs, descending=True)
    drop = sorted_p.cumsum(-1) > top_p
    drop[:, 1:] = drop[:, :-1].clone()          # keep the token that crosses top_p
    drop[:, 0] = False
    probs = probs.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), 0.0)
    probs = probs / probs.sum(-1, keepdim=True)
    x = race(probs, 1, generator)[:, 0]
    return x, probs.gather(-1, x[:, None])[:, 0]


def v2_stats(r, logits: torch.Tensor, rows: tuple | None = None):
    """The step's statistics with Fast-dLLM v2's candidate and confidence (greedy: the engine's own), read with
    the round's other rules (a generator). ``rows`` (s, e): only those rows were scored; the others' probabilities
    are zeroed, and the record's candidates are read of those (``SubBlockPolicy.draft``)."""
    c, z = r.cfg, r.unmaskable(logits)
    greedy = c.temperature <= 0           # sampling: probs, top-1, margin, entropy without a draw, then v2's draw
    small, probs = stats_on_device(z, c.temperature if greedy else 0.0, c.top_k if greedy else 0,
                                   c.top_p if greedy else 1.0, r.device_generator if greedy else None)
    drawn = () if greedy else v2_sample(z, c.temperature, c.top_p, r.device_generator)
    top = ()
    if rows is not None:
        probs[:rows[0]], probs[rows[1]:] = 0.0, 0.0
        top = tuple(reversed(torch.topk(probs, min(TOP_K, probs.shape[-1]), dim=-1)))        # ids, then p
    small, *rest = yield from read(small, *drawn, *top)
    st = unpack(small.numpy(), [([z], None, probs)])[0]
    if drawn:
        st.candidate, st.confidence = rest[0], rest[1].float()
    if top:
        st.top_ids, st.top_p = rest[-2:]
    return st


class SubBlockPolicy(Policy):
    name = "subblock"
    config_cls = config_class("subblock")

    @property
    def keeps_block_kv(self) -> bool:
        return self.cfg.block_cache

    def draft(self, ctx: BlockContext, s: int, e: int):
        """The step's statistics: the whole block, or (block cache, the sub-block's first slot decided) the
        sub-block's rows alone, the other slots of the record left unscored."""
        r = ctx.runner
        if not (r.keep_block_kv and r.block_kv and r.block_kv[0] == ctx.lo and not ctx.masked[s]):
            return (yield from v2_stats(r, (yield from r.forward("draft", ctx.lo, ctx.hi))[0]))
        rows = yield from r.forward_rows("draft", ctx.lo + s, ctx.lo + e)                      # (e - s, V)
        logits = rows.new_zeros((ctx.L, rows.shape[-1]))
        logits[s:e] = rows
        st = yield from v2_stats(r, logits, (s, e))    # the record's candidates: of the zeroed probabilities
        out = torch.ones(ctx.L, dtype=torch.bool)
        out[s:e] = False
        st.confidence[out], st.margin[out], st.entropy[out] = float("nan"), float("nan"), float("nan")
        st.candidate[out] = -1                                   # unscored (the rule looks inside the sub-block only)
        return st

    def run_block(self, ctx: BlockContext):
        cfg, r = self.cfg, ctx.runner
        if r.adapter.logit_shift and ctx.lo >= r.P and bool(ctx.masked[0]):
            st = yield from self.draft(ctx, 0, cfg.sub_block)     # the finished block's last row predicts the first slot
            ctx.commit(torch.tensor([0]), st.top1[:1], Reason.AR)
            yield ctx.emit("draft", st)
        for s in range(0, ctx.L, cfg.sub_block):
            e = min(s + cfg.sub_block, ctx.L)
            while ctx.masked[s:e].any():
                st = yield from self.draft(ctx, s, e)
                above, best = sub_block_commit(st.confidence, ctx.masked, s, e, cfg.tau)
                reason = Reason.THRESHOLD if float(st.confidence[best]) > cfg.tau else Reason.ARGMAX
                ctx.commit(torch.tensor([best]), st.candidate[best:best + 1], reason)
                ctx.commit(above, st.candidate[above], Reason.THRESHOLD)
                yield ctx.emit("draft", st)
