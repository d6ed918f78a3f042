"""Prophet (Li et al., "Diffusion language models know the answer before decoding"; pixeli99/Prophet,
``generate_earlyexit.generate``): LLaDA's fixed steps with an early commit.

Every forward, before its step's commits: the gap g = top-1 − top-2 logit (raw logits) is averaged over the answer
region (``prophet_window``):
- ``answer`` (the release's evaluation, ``eval.sh`` with ``constraints_text="200:The|201:answer|202:is"``):
  "The answer is" is written into the response canvas at ``answer_at`` (word k at answer_at + k, each encoded with a
  leading space, a word's i-th token at its slot + i, a later word overwriting: its ``_parse_constraints``) before
  the first forward and stays there (the release re-imposes it every step; a slot that is not [MASK] is never
  written here, so it stays by itself); the region is the ``answer_length`` (5) positions from the phrase's last
  slot + 2 (``max(constraints) + 2``), whether masked or written, clipped to the canvas; a forward that scored none
  of them cannot exit (the release's empty ``answer_gaps``). A full-attention forward without a cache scores every
  position, on a shifted model (Dream) too; with Fast-dLLM's caches or on a block-causal model, only the slots it
  scores count (a block-causal model scores the window only while its block is decoded). Each block runs the
  release's forward schedule: all its ``steps`` forwards, the quota n // S with the remainder first, even those
  that commit nothing (a block holding the phrase has fewer masks than forwards; eval.sh's 256 slots, 256 steps,
  block 32: 32 forwards in the phrase's block, not 29), so NFE and the progress the bars read count them;
- ``block`` (Unmask's rule, the default): the block's still-masked slots, the ones an exit commits. Unmask's tasks
  ask for no answer phrase (their graders read "####", a JSON list, a story's words), and a decoder cannot know
  the task: the release's window is asked for by name, for a prompt that ends its answer with "The answer is".
  Its gap includes [EOS]/[PAD] filler, so confident filler can end a decode whose answer is not yet clear.
With progress = forwards so far / (steps per block × blocks), the bar is ``gap_early`` while progress < 0.33,
``gap_mid`` while < 0.67, else ``gap_late`` (7.5, 5.0, 2.5). If the mean gap clears the bar, every masked
slot is committed to its candidate in this forward and the step's quota is skipped; otherwise LLaDA's quota
(the most confident k_j) is committed; under ``prophet_window=block`` a block ends once its masks are filled.

Where we chose:
- after the exit the reference fills every remaining position from that one forward, which sees the whole canvas.
  On a full-attention model (LLaDA, Dream) so does this one: the exit forward's candidates after the block
  (``Runner.later``, drawn with the decode's generator) fill every [MASK] left, and the decode ends there. A
  block-causal model's forward scores only its block, so there each later block is committed whole in its own
  first forward (one forward per block, counted in NFE); so is an exit in one of the dual cache's later forwards,
  which skip the rows after the block;
- ``gap_scale`` (ours, default 1) multiplies the three bars, so a Sweep has one dial.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from engine.catalogue.catalogue import config_class
from engine.errors import ConfigError
from engine.decoders.schedule import masked_topk, transfer_schedule
from engine.runtime.device import on_host, read
from engine.runtime.sampling import stats_on_device
from engine.runtime.loop import BlockContext, Policy
from engine.records.trace import Reason
from engine.decoders.prophet.card import ProphetFields, ProphetSummary

PHASES = (0.33, 0.67)   # progress at which the bar moves from early to mid, and from mid to late
PHRASE = ("The", "answer", "is")   # the release's eval.sh constraints_text, word by word


def phrase_slots(tokenizer, answer_at: int) -> dict[int, int]:
    """{response slot: token} of "The answer is" as the release's ``_parse_constraints`` places it from eval.sh's
    "200:The|201:answer|202:is": word k at answer_at + k, encoded with a leading space, its i-th token at that slot
    + i; a later word overwrites what an earlier word's extra tokens wrote there (the dict's last write)."""
    out: dict[int, int] = {}
    for k, w in enumerate(PHRASE):
        for i, t in enumerate(tokenizer.encode(" " + w, add_special_tokens=False)):
            out[answer_at + k + i] = t
    return out


def place_phrase(runner, answer_at: int, length: int) -> range:
    """Write the phrase at ``answer_at`` of the response (the slots inside the canvas, as the release) and return
    the window of ``length`` absolute positions it watches (clipped to the canvas)."""
    if answer_at >= runner.end - runner.P:
        raise ConfigError(f"prophet_window=answer: answer_at ({answer_at}) must lie inside the generation "
                          f"(gen_length {runner.end - runner.P})")
    tok = getattr(runner.adapter, "tokenizer", None)
    slots = phrase_slots(tok, answer_at) if tok is not None else {}
    unk = getattr(tok, "unk_token_id", None)
    if len(slots) < len(PHRASE) or (unk is not None and unk in slots.values()):
        raise ConfigError(f"prophet_window=answer: {runner.adapter.name}'s tokenizer has no tokens for "
                          f"\"{' '.join(PHRASE)}\" (use prophet_window=block)")
    for at, t in slots.items():
        if runner.P + at < runner.end:
            runner.tokens[runner.P + at] = t
    first = runner.P + max(slots) + 2                    # max(constraints) + 2
    return range(min(first, runner.end), min(first + length, runner.end))


def phase_bar(progress: float, early: float, mid: float, late: float) -> float:
    """Prophet's ``should_early_exit`` bar at this progress."""
    return early if progress < PHASES[0] else mid if progress < PHASES[1] else late


def release_schedule(n_masked: int, steps: int) -> list[int]:
    """The release's ``get_num_transfer_tokens`` over ``steps`` forwards: n // S, the remainder first, zeros
    included (a block holding the phrase has fewer masks than forwards: each forward still runs)."""
    return [n_masked // steps + (j < n_masked % steps) for j in range(steps)]


def logit_gap(logits: torch.Tensor) -> torch.Tensor:
    """(L,) top-1 minus top-2 of (L, V) logits, reduced where the logits are (the rule reads it)."""
    top2 = torch.topk(logits.double(), 2, dim=-1).values
    return (top2[:, 0] - top2[:, 1]).float()


class ProphetPolicy(Policy):
    name = "prophet"
    config_cls = config_class("prophet")
    keeps_logits = True         # its window's earlier rows are read from the forward that recomputed them

    def start(self, runner) -> None:
        self.exit_draw = None                        # the generator's state after ``exit_fill``'s draw
        self.forwards, self.exited_at = 0, None      # the decode's forward count; the forward that exited
        cfg = self.cfg
        self.window = place_phrase(runner, cfg.answer_at, cfg.answer_length) if cfg.prophet_window == "answer" \
            else None

    def answer_gaps(self, ctx: BlockContext, logits: torch.Tensor) -> tuple:
        """The gaps of the window slots this forward scored, on the device (none: an empty tuple)."""
        r, rows = ctx.runner, []
        for pos in self.window:
            if ctx.lo <= pos < ctx.hi:
                rows.append(logits[pos - ctx.lo])
            elif pos >= ctx.hi and r.later is not None:
                rows.append(r.later[pos - ctx.hi])
            elif pos < ctx.lo and (row := r.logits_of(pos, pos + 1)) is not None:
                rows.append(row[0])
        return (logit_gap(torch.stack(rows)),) if rows else ()

    def exit_fill(self, ctx: BlockContext) -> tuple:
        """The candidates an exit in this forward writes after the block (a full-attention forward's later rows),
        on the device, made before the rule knows whether it exits (to be read with the rest); where they draw,
        the generator is set back and ``exit_draw`` kept, which an exit takes: the stream is the one drawing at
        the exit gave."""
        r, c = ctx.runner, self.cfg
        if self.exited_at is not None or r.later is None or not len(r.later) or on_host(r.later):
            return ()                               # on the host (a read costs no wait) made at the exit instead
        before = r.device_generator.get_state()
        small, _ = stats_on_device(r.unmaskable(r.later), c.temperature, c.top_k, c.top_p, r.device_generator)
        self.exit_draw = r.device_generator.get_state()
        r.device_generator.set_state(before)
        return (small[:, 0].long(),)

    def run_block(self, ctx: BlockContext):
        cfg, B = self.cfg, self.cfg.block_size
        steps = cfg.steps or B
        nominal = steps * (ctx.index + math.ceil((ctx.runner.end - ctx.lo) / B))   # steps × blocks, as generate's
        n = int(ctx.masked.sum())                     # LLaDA's quota; an exit ends it early
        for k in release_schedule(n, steps) if self.window is not None else transfer_schedule(n, steps):
            if not ctx.masked.any() and (self.window is None or self.exited_at is not None):
                break
            logits, st = yield from ctx.draft()
            self.forwards += 1
            masked = ctx.masked.clone()
            window = self.answer_gaps(ctx, logits) if self.window is not None else ()
            fill = self.exit_fill(ctx)
            gap, *reads = yield from read(logit_gap(logits), *window, *fill)                  # the rule's one read
            mean_gap = float(gap[masked].mean()) if self.window is None else \
                float(reads[0].double().mean()) if window else math.nan
            progress = self.forwards / nominal
            bar = cfg.gap_scale * phase_bar(progress, cfg.gap_early, cfg.gap_mid, cfg.gap_late)
            if self.exited_at is None and mean_gap >= bar:
                self.exited_at = self.forwards
            if self.exited_at is not None:
                idx = masked.nonzero()[:, 0]
                ctx.commit(idx, st.candidate[idx], Reason.PROPHET_EXIT)
                r = ctx.runner
                if fill and self.exited_at == self.forwards:
                    r.device_generator.set_state(self.exit_draw)
                    ctx.fill_after(reads[-1], Reason.PROPHET_EXIT)
                elif r.later is not None and len(r.later) and self.exited_at == self.forwards:
                    ctx.fill_after(r.stats(r.later).candidate, Reason.PROPHET_EXIT)
            else:
                idx = masked_topk(st.confidence, masked, k)
                ctx.commit(idx, st.candidate[idx], Reason.SCHEDULE)
            yield ctx.emit("draft", st, ProphetFields(
                logit_gap=np.where(masked.numpy(), gap.numpy(), np.nan).astype(np.float32), prophet_gap=mean_gap,
                prophet_bar=float(bar), progress=float(progress), exited=self.exited_at is not None))

    def summary(self, runner) -> ProphetSummary:
        w = self.window
        return ProphetSummary(exit_forward=self.exited_at, answer_window=[w.start, w.stop] if w is not None else None)
