"""Train the embedded block-diffusion model: a stock ``Qwen3ForCausalLM`` with the SDAR / BD3-LM "2L" objective.

Each training sequence is ``[clean x0 (Lc) | noisy xt (N)]``. Blocks are aligned to absolute positions
(``block = pos // B``). The noisy half holds the blocks from the one containing the first answer token to the one
containing [EOS]; in each, k ~ U{1..n} of its n answer slots are masked. Noisy slot i predicts x0[i] (no shift).
Attention (True = may attend):
    clean -> clean : key block <= query block        (block-causal; what the KV cache holds at inference)
    noisy -> clean : key block <  query block        (strictly earlier blocks)
    noisy -> noisy : same block, bidirectional
    clean -> noisy : never
B is drawn per batch from a mix that includes 1, so the same weights decode autoregressively (S2D2's verifier).

    python -m tools.training.train --out runs/base --minutes 95 --layers 4
    python -m tools.training.train --out runs/tasks --task mix --init assets/models/unmask-arith-tiny --minutes 85
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import Qwen3Config, Qwen3ForCausalLM

from engine.tasks import get_task, task_tokenizer

BLOCK_MIX = {1: 0.3, 2: 0.1, 4: 0.2, 8: 0.2, 16: 0.2}


def model_config(vocab_size: int, layers: int, hidden: int, special: dict) -> Qwen3Config:
    heads = max(1, hidden // 64)
    return Qwen3Config(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                       num_attention_heads=heads, num_key_value_heads=heads, head_dim=64,
                       intermediate_size=3 * hidden, max_position_embeddings=256, rms_norm_eps=1e-6,
                       rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                       tie_word_embeddings=True, attention_dropout=0.0, **special)


def encode(tok, problem) -> tuple[list[int], int]:
    """[BOS] prompt answer [EOS]; returns ids and the index of the first answer token."""
    prompt = tok(problem.prompt, add_special_tokens=False).input_ids
    answer = tok(problem.solution, add_special_tokens=False).input_ids
    ids = [tok.bos_token_id] + prompt + answer + [tok.eos_token_id]
    return ids, 1 + len(prompt)


def corrupt_visible(noisy: list[int], target: list[int], slots: list[int], edit: tuple, rng: random.Random) -> None:
    """Token-to-token objective on a block's answer slots left visible (LLaDA2.1-style editing): a share
    `edit[0]` become a wrong token (half any word, half another answer token of the row, so names swap with
    names) with the clean token as target; a share `edit[1]` of the untouched ones target themselves ("keep").
    Without it a model trained only on [MASK] slots says nothing useful about a committed token."""
    frac, keep, words = edit
    visible = [j for j in slots if target[j] == -100]
    answer_tokens = [noisy[j] for j in slots if target[j] == -100] or words
    for j in visible:
        r = rng.random()
        if r < frac:
            pool = words if rng.random() < 0.5 else answer_tokens
            wrong = rng.choice(pool)
            if wrong != noisy[j]:
                target[j], noisy[j] = noisy[j], wrong
        elif r < frac + keep * (1 - frac):
            target[j] = noisy[j]


def build_2l_sample(ids: list[int], ans_start: int, B: int, mask_id: int, pad_id: int, rng: random.Random,
                    edit: tuple | None = None):
    """One 2L training row: tokens, positions, block ids, noisy flags, targets (-100 = no loss).
    `edit` = (corrupt share, keep share, word ids) adds the token-to-token objective (`corrupt_visible`)."""
    eos = len(ids) - 1
    first_blk, last_blk = ans_start // B, eos // B
    Lc = (last_blk + 1) * B
    clean = ids + [pad_id] * (Lc - len(ids))
    noisy_pos = list(range(first_blk * B, Lc))
    noisy = [clean[p] for p in noisy_pos]
    target = [-100] * len(noisy_pos)
    for b in range(first_blk, last_blk + 1):
        slots = [j for j, p in enumerate(noisy_pos) if p // B == b and p >= ans_start]
        for j in rng.sample(slots, rng.randint(1, len(slots))):
            target[j] = noisy[j]
            noisy[j] = mask_id
        if edit is not None:
            corrupt_visible(noisy, target, slots, edit, rng)
    tokens = clean + noisy
    pos = list(range(Lc)) + noisy_pos
    blk = [p // B for p in pos]
    is_noisy = [0] * Lc + [1] * len(noisy_pos)
    return tokens, pos, blk, is_noisy, [-100] * Lc + target


def collate_2l(rows: list[tuple], pad_id: int):
    T = max(len(r[0]) for r in rows)
    n = len(rows)
    tokens = torch.full((n, T), pad_id, dtype=torch.long)
    pos = torch.zeros((n, T), dtype=torch.long)
    blk = torch.full((n, T), -1, dtype=torch.long)
    noisy = torch.zeros((n, T), dtype=torch.bool)
    real = torch.zeros((n, T), dtype=torch.bool)
    target = torch.full((n, T), -100, dtype=torch.long)
    for i, (t, p, b, z, y) in enumerate(rows):
        k = len(t)
        tokens[i, :k], pos[i, :k], blk[i, :k] = torch.tensor(t), torch.tensor(p), torch.tensor(b)
        noisy[i, :k], target[i, :k], real[i, :k] = torch.tensor(z, dtype=torch.bool), torch.tensor(y), True
    bq, bk = blk[:, :, None], blk[:, None, :]
    nq, nk = noisy[:, :, None], noisy[:, None, :]
    allowed = (~nq & ~nk & (bk <= bq)) | (nq & ~nk & (bk < bq)) | (nq & nk & (bk == bq))
    allowed &= real[:, :, None] & real[:, None, :]
    allowed |= torch.eye(T, dtype=torch.bool)[None]  # padded rows see themselves: no fully masked row
    return tokens, pos, allowed[:, None], target  # mask (n, 1, T, T)


def selected_logits(model, tokens, pos, mask, target):
    hidden = model.model(input_ids=tokens, attention_mask=mask, position_ids=pos).last_hidden_state  # (n, T, H)
    return model.lm_head(hidden[target != -100])  # (m, V)


def masked_loss(model, tokens, pos, mask, target):
    logits = selected_logits(model, tokens, pos, mask, target)
    sel = target[target != -100]
    return F.cross_entropy(logits, sel), logits.argmax(-1) == sel


def distilled_loss(model, teacher, alpha: float, tokens, pos, mask, target):
    """(1 - alpha) CE(clean token) + alpha KL(teacher || student) on the same noisy slots: a drafter is paid for
    agreeing with its target (SimSD accepts a draft the target would write), not for being right on its own."""
    logits = selected_logits(model, tokens, pos, mask, target)
    with torch.no_grad():
        t_logp = F.log_softmax(selected_logits(teacher, tokens, pos, mask, target), -1)  # (m, V)
    kl = F.kl_div(F.log_softmax(logits, -1), t_logp, log_target=True, reduction="batchmean")
    return (1 - alpha) * F.cross_entropy(logits, target[target != -100]) + alpha * kl


@torch.no_grad()
def ar_accuracy(model, tok, problems, task, max_new: int = 64) -> dict[str, float]:
    """Greedy AR (B = 1) exact-match without cache: query = [MASK] at the next position, causal over the rest."""
    correct: dict[str, list[bool]] = {}
    for prob in problems:
        ids = [tok.bos_token_id] + tok(prob.prompt, add_special_tokens=False).input_ids
        start = len(ids)
        for _ in range(max_new):
            x = torch.tensor([ids + [tok.mask_token_id]])
            n = x.shape[1]
            mask = torch.ones(n, n, dtype=torch.bool).tril()[None, None]
            h = model.model(input_ids=x, attention_mask=mask, position_ids=torch.arange(n)[None]).last_hidden_state
            nxt = int(model.lm_head(h[0, -1]).argmax())
            ids.append(nxt)
            if nxt == tok.eos_token_id:
                break
        correct.setdefault(prob.task, []).append(task.check(tok.decode(ids[start:], skip_special_tokens=True), prob))
    return {k: round(sum(v) / len(v), 3) for k, v in sorted(correct.items())}


def init_from(model, tok, path: str) -> None:
    """Start from a trained model whose vocabulary is a prefix of ours: copy every weight, and the embedding rows
    of the shared ids (new words keep their random rows; the head is tied to the embedding)."""
    from safetensors.torch import load_file
    from transformers import AutoTokenizer
    src_tok = AutoTokenizer.from_pretrained(path)
    ours = tok.get_vocab()
    if any(ours.get(w) != i for w, i in src_tok.get_vocab().items()):
        raise SystemExit(f"--init {path}: its vocabulary is not a prefix of the task's tokenizer")
    state = load_file(str(Path(path) / "model.safetensors"))
    emb = state.pop("model.embed_tokens.weight")
    state.pop("lm_head.weight", None)
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or set(missing) - {"model.embed_tokens.weight", "lm_head.weight"}:
        raise SystemExit(f"--init {path}: architecture differs (missing {missing}, unexpected {unexpected})")
    with torch.no_grad():
        model.model.embed_tokens.weight[: emb.shape[0]] = emb


def lr_at(frac: float, step: int, base: float, warmup: int) -> float:
    if step < warmup:
        return base * (step + 1) / warmup
    return base * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac))))


def save_model(model, tok, out: Path, meta: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    cfg = json.loads((out / "config.json").read_text())
    # SDAR format: Qwen3 weights + block-diffusion metadata; our loader maps it back to Qwen3ForCausalLM.
    cfg.update(model_type="sdar", architectures=["SDARForCausalLM"], mask_token_id=tok.mask_token_id,
               block_size=4, unmask=meta)
    (out / "config.json").write_text(json.dumps(cfg, indent=2))


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="run directory (checkpoint, log, exported model)")
    ap.add_argument("--task", default="arith")
    ap.add_argument("--init", default="", help="start from this model directory (same layers and hidden size)")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--minutes", type=float, default=95.0, help="wall-clock budget; the cosine decay spans it")
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0 = budget only)")
    ap.add_argument("--edit-frac", type=float, default=0.0,
                    help="share of visible answer slots corrupted for the token-to-token objective (0 = off)")
    ap.add_argument("--keep-frac", type=float, default=0.10, help="share of the other visible slots that target "
                    "themselves when --edit-frac is on")
    ap.add_argument("--focus", type=float, default=0.0, help="share of rows drawn from the task's constrained "
                    "prompts (a choice stated in the prompt, TaskBase.constrained): a new prompt rule is one token "
                    "in a few percent of rows otherwise, too little signal to learn it in a continued run")
    ap.add_argument("--weights", default="", help="a mix task's shares, e.g. arith=0.2,story=0.3,picks=0.5 "
                    "(default: the task's own)")
    ap.add_argument("--teacher", default="", help="distil from this model directory (same tokenizer): the loss "
                    "mixes the clean token's cross-entropy with KL(teacher || student) on the same noisy slots")
    ap.add_argument("--distill", type=float, default=0.0, help="weight of the KL term (0 = cross-entropy only)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--eval-every", type=int, default=300, help="steps between held-out evaluations")
    ap.add_argument("--eval-n", type=int, default=50)
    ap.add_argument("--log-every", type=int, default=50)
    return ap.parse_args(argv)


def setup(args, tok):
    """(model, optimiser, step, elapsed): resumed from the run's checkpoint, else initialised (or --init)."""
    special = dict(pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    torch.manual_seed(args.seed)
    model = Qwen3ForCausalLM(model_config(len(tok), args.layers, args.hidden, special))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.98), weight_decay=0.01)
    if (at := resume(model, opt, Path(args.out))) is not None:
        return model, opt, *at
    if args.init:
        init_from(model, tok, args.init)
    return model, opt, 0, 0.0


def resume(model, opt, out: Path) -> tuple[int, float] | None:
    """(step, consumed wall time) from the run's checkpoint, weights and optimiser loaded; None without one (the
    cosine schedule depends on the consumed time, so it comes back too)."""
    ckpt = out / "ckpt.pt"
    if not ckpt.exists():
        return None
    state = torch.load(ckpt, weights_only=True)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    print(f"resumed at step {int(state['step'])}, {float(state['elapsed']):.0f}s", flush=True)
    return int(state["step"]), float(state["elapsed"])


def checkpoint(model, opt, step: int, elapsed: float, out: Path) -> None:
    torch.save(dict(model=model.state_dict(), opt=opt.state_dict(), step=step, elapsed=elapsed), out / "ckpt.pt")


def checkpoint_every(last: float, model, opt, step: int, elapsed: float, out: Path, every_s: float = 300.0) -> float:
    """A checkpoint once `every_s` has passed since the last (at `last`); returns the last checkpoint's time."""
    if time.time() - last <= every_s:
        return last
    checkpoint(model, opt, step, elapsed, out)
    return time.time()


def draw(task, rng: random.Random, focus: float):
    """One training problem; with probability `focus`, one whose prompt states a choice (``constrained``)."""
    prob = task.sample(rng)
    if focus > 0 and rng.random() < focus:
        while not task.constrained(prob):
            prob = task.sample(rng)
    return prob


def word_ids(tok) -> list[int]:
    """Every id but the specials: what a corrupted slot may be replaced with."""
    special = set(tok.all_special_ids)
    return [i for i in range(len(tok)) if i not in special]


def load_teacher(path: str, tok):
    """The distillation teacher, frozen: an SDAR-format model of this repository with the task's vocabulary."""
    from engine.models.model import load_model
    teacher = load_model(path, device="cpu").model.eval()
    if teacher.config.vocab_size != len(tok):
        raise SystemExit(f"--teacher {path}: vocabulary {teacher.config.vocab_size}, the task's {len(tok)}")
    return teacher.requires_grad_(False)


def train_step(args, model, opt, tok, task, step: int, elapsed: float) -> tuple[float, int]:
    """One optimiser step on the step's batch (a function of the step: exact resume); returns (loss, B)."""
    rng = random.Random(f"{args.seed}/{step}")
    B = rng.choices(list(BLOCK_MIX), list(BLOCK_MIX.values()))[0]
    edit = (args.edit_frac, args.keep_frac, word_ids(tok)) if args.edit_frac > 0 else None
    rows = [build_2l_sample(*encode(tok, draw(task, rng, args.focus)), B, tok.mask_token_id, tok.pad_token_id,
                            rng, edit) for _ in range(args.batch)]
    batch = collate_2l(rows, tok.pad_token_id)
    teacher = getattr(args, "teacher_model", None)
    loss = (distilled_loss(model, teacher, args.distill, *batch) if teacher is not None
            else masked_loss(model, *batch)[0])
    optimise(model, opt, loss, lr_at(elapsed / (args.minutes * 60), step, args.lr, args.warmup))
    return loss.item(), B


def optimise(model, opt, loss, lr: float) -> None:
    """One optimiser step at learning rate ``lr``, gradients clipped to norm 1."""
    for g in opt.param_groups:
        g["lr"] = lr
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()


def evaluate(model, tok, val, task, step: int, wall: float) -> dict:
    model.eval()
    acc = ar_accuracy(model, tok, val, task)
    model.train()
    # one task: keep the log's original flat number
    return dict(step=step, wall_s=round(wall, 1), val_ar_acc=next(iter(acc.values())) if len(acc) == 1 else acc,
                n=len(val))


def open_run(args, setup):
    """(run directory, task, tokenizer, model, optimiser, step, elapsed seconds, val problems, log file): the model
    and optimiser resumed from the run's checkpoint when there is one (``setup(args, tok)``)."""
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    task = get_task(args.task)
    if getattr(args, "weights", ""):  # the mix's shares for this run (the vocabulary stays the task's)
        shares = dict(kv.split("=") for kv in args.weights.split(","))
        if set(shares) != set(task.weights):
            raise SystemExit(f"--weights must name each of {sorted(task.weights)}")
        task.weights = {k: float(v) for k, v in shares.items()}
    tok = task_tokenizer(task)
    model, opt, step, elapsed = setup(args, tok)
    print(f"params {sum(p.numel() for p in model.parameters())}, vocab {len(tok)}", flush=True)
    return out, task, tok, model, opt, step, elapsed, task.problems("val", args.eval_n, seed=args.seed), \
        open(out / "log.jsonl", "a")


def write_records(log, recs: list[dict]) -> None:
    """Append records to the run's log (JSON lines) and print them."""
    for rec in recs:
        log.write(json.dumps(rec) + "\n")
        log.flush()
        print(rec, flush=True)


def main(argv=None) -> None:
    args = parse_args(argv)
    out, task, tok, model, opt, step, elapsed, val, log = open_run(args, setup)
    if args.teacher:
        args.teacher_model = load_teacher(args.teacher, tok)
    n_params = sum(p.numel() for p in model.parameters())
    t0, ema, last_save, window = time.time() - elapsed, None, time.time(), []
    model.train()
    while (elapsed := time.time() - t0) <= args.minutes * 60 and not (args.max_steps and step >= args.max_steps):
        loss, B = train_step(args, model, opt, tok, task, step, elapsed)
        step += 1
        ema = loss if ema is None else 0.98 * ema + 0.02 * loss
        window.append(loss)
        recs = []
        if step % args.log_every == 0:
            recs.append(dict(step=step, wall_s=round(elapsed, 1), loss=round(sum(window) / len(window), 4),
                             loss_ema=round(ema, 4), B=B))
            window.clear()
        if step % args.eval_every == 0:
            recs.append(evaluate(model, tok, val, task, step, time.time() - t0))
        write_records(log, recs)
        last_save = checkpoint_every(last_save, model, opt, step, elapsed, out)
    checkpoint(model, opt, step, elapsed, out)
    model.eval()
    meta = dict(task=args.task, init=args.init or None, layers=args.layers, hidden=args.hidden, params=n_params,
                steps=step, train_seconds=round(elapsed), batch=args.batch, lr=args.lr, block_mix=BLOCK_MIX,
                seed=args.seed, edit_frac=args.edit_frac, keep_frac=args.keep_frac if args.edit_frac else 0.0,
                focus=args.focus, weights=args.weights or None, teacher=args.teacher or None,
                distill=args.distill)
    save_model(model, tok, out / "model", meta)
    print(f"saved {out / 'model'} after {step} steps, {elapsed:.0f}s", flush=True)


if __name__ == "__main__":
    main()
