"""The `dream` decoder against a test-side ``diffusion_generate`` (Dream's and Fast-dLLM's
``dream/model/generation_utils.py``), written from its description and drawing its random numbers from the global
torch generator as the reference does; the decoder draws from its own, seeded alike."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from engine.decoders import build_decoder
from engine.runtime.loop import Generation
from engine.models.model import load_model
from tests.families import write_qwen2_family

PROMPT = "Ann has 3 apples . She buys 5 more ."


@pytest.fixture(scope="module")
def dream(tmp_path_factory):
    return load_model(str(write_qwen2_family(tmp_path_factory.mktemp("dream") / "m", "Dream")), device="cpu")


def ref_sample(logits, temperature=0.0, margin=False, neg_entropy=False):
    if temperature > 0:
        logits = logits / temperature
    probs = torch.softmax(logits, dim=-1)
    if temperature > 0:
        x0 = torch.distributions.Categorical(probs=probs).sample()
        confidence = torch.gather(probs, -1, x0.unsqueeze(-1)).squeeze(-1)
    else:
        confidence, x0 = probs.max(dim=-1)
    if margin:
        s = torch.sort(probs, dim=-1, descending=True)[0]
        confidence = s[:, 0] - s[:, 1]
    if neg_entropy:
        confidence = torch.sum(probs * torch.log(probs + 1e-10), dim=-1)
    return confidence, x0


def reference_diffusion_generate(a, prompt_ids, gen, steps, alg, alg_temp=0.0, temperature=0.0, eps=1e-3):
    mask = a.mask_token_id
    x = F.pad(torch.tensor([prompt_ids]), (0, gen), value=mask)
    n = x.shape[1]
    timesteps = torch.linspace(1, eps, steps + 1)
    for i in range(steps):
        mask_index = x == mask
        logits = a.forward(x[0], torch.ones(n, n, dtype=torch.bool), torch.arange(n))[None]   # shifted, as Dream
        mask_logits = logits[mask_index]
        t, s = timesteps[i], timesteps[i + 1]
        if alg == "origin":
            p_transfer = 1 - s / t if i < steps - 1 else 1
            x0 = torch.zeros_like(x[mask_index]) + mask
            flip = torch.rand(*x0.shape) < p_transfer
            _, x0[flip] = ref_sample(mask_logits[flip], temperature)
            x[mask_index] = x0.clone()
            continue
        confidence, x0 = ref_sample(mask_logits, temperature, margin=alg == "topk_margin",
                                    neg_entropy=alg == "entropy")
        num_mask = mask_index.sum() / mask_index.shape[0]
        k = int(num_mask * (1 - s / t)) if i < steps - 1 else int(num_mask)
        full = torch.full_like(x, -torch.inf, dtype=logits.dtype)
        full[mask_index] = confidence
        if k > 0:
            if alg_temp == 0:
                _, transfer = torch.topk(full, k)
            else:
                transfer = torch.multinomial(F.softmax(full / alg_temp, dim=-1), num_samples=k)
            x_ = torch.zeros_like(x) + mask
            x_[mask_index] = x0.clone()
            rows = torch.arange(x.size(0)).unsqueeze(1).expand_as(transfer)
            x[rows, transfer] = x_[rows, transfer]
    return x[0, len(prompt_ids):].tolist()


CASES = [dict(alg="maskgit_plus"), dict(alg="topk_margin"), dict(alg="entropy"), dict(alg="entropy", steps=5),
         dict(alg="origin", seed=3), dict(alg="maskgit_plus", alg_temp=0.5, seed=4),
         dict(alg="entropy", temperature=1.0, seed=5), dict(alg="origin", temperature=0.8, seed=6)]


@pytest.mark.parametrize("case", CASES, ids=[str(c) for c in CASES])
def test_dream_decoder_gives_diffusion_generates_ids(dream, case):
    case = dict(case)
    seed, steps = case.pop("seed", 0), case.pop("steps", 12)
    ids = dream.encode_prompt(PROMPT)
    tr = Generation(dream, ids, build_decoder("dream", gen_length=12, steps=steps, seed=seed, stop_at_eos=False,
                                              **case)).run()
    torch.manual_seed(seed)
    assert tr.meta.final_tokens[len(ids):] == reference_diffusion_generate(dream, ids, 12, steps, **case)
    assert tr.meta.block_size == 12 and all(r.field("alg") == case["alg"] for r in tr.records)


def test_scores_are_recorded_for_the_ranking_view(dream):
    tr = Generation(dream, PROMPT, build_decoder("dream", gen_length=8, steps=4, alg="topk_margin")).run()
    r = tr.records[0]
    score = r.field("dream_score")
    s = torch.linspace(1, 1e-3, 5)[1]                         # the first step reveals int(8 · (1 − s/t)), t = 1
    assert (~torch.isnan(torch.tensor(score))).sum() == 8 and r.n_committed == int(8 * (1 - s))


def test_dream_sampler_needs_a_full_attention_model(adapter):
    from engine.errors import ConfigError
    with pytest.raises(ConfigError, match="full-attention"):
        Generation(adapter, [1, 5, 6], build_decoder("dream"))


def test_every_view_draws_a_dream_trace_and_the_ranking_shows_the_revealed(dream):
    from explorer.registry import VIEWS
    from explorer.views.dream import ranking
    tr = Generation(dream, PROMPT, build_decoder("dream", gen_length=8, steps=4, alg="maskgit_plus")).run()
    for v in VIEWS:
        v.render(tr, 1, None, None)
    bars = ranking(tr, 0).data[0]
    dark = [c == "#08519c" for c in bars.marker.color]
    assert sum(dark) == tr.records[0].n_committed and dark == sorted(dark, reverse=True)   # the best ones, first
