"""Training smoke test: a few steps of the real script; the loss must fall and the export must load."""

import json

import pytest
import torch

from engine.models.model import load_model
from tools.training.train import build_2l_sample, collate_2l, main


def test_2l_mask_layout():
    import random
    ids = [1, 10, 11, 12, 13, 14, 15, 2]       # [BOS] 2 prompt tokens | answer from index 3 | [EOS] at 7
    tokens, pos, blk, noisy, target = row = build_2l_sample(ids, 3, 2, mask_id=3, pad_id=0, rng=random.Random(0))
    assert pos[:8] == list(range(8)) and pos[8:] == [2, 3, 4, 5, 6, 7]   # noisy half: blocks 1..3 only
    assert tokens[8] == 11 and target[8] == -100      # the prompt token inside the first answer block stays clean
    assert {t for t, y in zip(tokens[8:], target[8:]) if y != -100} == {3}   # targets only at masked slots
    assert all(target[8 + i] == ids[p] for i, p in enumerate(pos[8:]) if target[8 + i] != -100)
    _, _, mask, _ = collate_2l([row], 0)
    m = mask[0, 0]
    assert m[10, :4].all() and not m[10, 4:8].any()   # noisy block 2 (pos 4,5) sees clean blocks 0-1 only
    assert m[10, 11] and not m[10, 12] and not m[10, 9]   # ... and its own noisy block only
    assert not m[:8, 8:].any()                        # clean never sees noisy
    assert m[5, 4] and not m[3, 4]                    # clean is block-causal


def test_training_smoke(tmp_path):
    out = tmp_path / "run"
    main(["--out", str(out), "--layers", "1", "--hidden", "64", "--batch", "16", "--max-steps", "60",
          "--warmup", "5", "--lr", "3e-3", "--eval-every", "1000", "--log-every", "10", "--minutes", "5"])
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in log if "loss" in r]
    assert losses[-1] < 0.75 * losses[0], losses
    adapter = load_model(str(out / "model"), device="cpu")
    assert adapter.mask_token_id == adapter.tokenizer.mask_token_id and adapter.model_type == "sdar"
    # resume continues from the checkpoint's step
    main(["--out", str(out), "--layers", "1", "--hidden", "64", "--batch", "16", "--max-steps", "70",
          "--warmup", "5", "--eval-every", "1000", "--log-every", "10", "--minutes", "5"])
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert log[-1]["step"] == 70
    assert torch.load(out / "ckpt.pt", weights_only=True)["step"] == 70


def test_distilled_loss_is_the_kl_to_the_teacher_mixed_with_the_cross_entropy():
    import random

    import torch.nn.functional as F
    from transformers import Qwen3ForCausalLM

    from tools.training.train import distilled_loss, masked_loss, model_config, selected_logits
    special = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    student, teacher = (Qwen3ForCausalLM(model_config(40, 1, 64, special)).eval() for _ in range(2))
    ids = [1, 10, 11, 12, 13, 14, 15, 2]
    batch = collate_2l([build_2l_sample(ids, 3, 2, mask_id=3, pad_id=0, rng=random.Random(0))], 0)
    ce = masked_loss(student, *batch)[0]
    assert torch.allclose(distilled_loss(student, teacher, 0.0, *batch), ce)
    assert float(distilled_loss(student, student, 1.0, *batch)) == pytest.approx(0.0, abs=1e-6)   # KL(p || p)
    s, t = selected_logits(student, *batch), selected_logits(teacher, *batch)
    kl = (F.softmax(t, -1) * (F.log_softmax(t, -1) - F.log_softmax(s, -1))).sum(-1).mean()
    assert float(distilled_loss(student, teacher, 0.5, *batch)) == pytest.approx(float(0.5 * ce + 0.5 * kl), rel=1e-5)
