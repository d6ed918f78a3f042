"""Real model families on tiny random checkpoints in their published layouts (no downloads): strict loading, logit
shift, LLaDA's renamed weights, exact caching for block-causal families, LLaDA's generate.py, decoder applicability."""

import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from engine.decoders import build_decoder
from engine.errors import ConfigError, ModelLoadError
from engine.runtime.loop import Generation
from engine.models.model import load_model
from tests.families import write_llada, write_qwen2_family

PROMPT = "Ann has 3 apples . She buys 5 more ."


@pytest.fixture(scope="module")
def dirs(tmp_path_factory, sdar_dir):
    root = tmp_path_factory.mktemp("families")
    llada, original = write_llada(root / "llada")
    return dict(sdar=sdar_dir, dream=write_qwen2_family(root / "dream", "Dream"),
                fastdllm=write_qwen2_family(root / "fastdllm", "Fast_dLLM_Qwen"), llada=llada, original=original)


@pytest.fixture(scope="module")
def models(dirs):
    return {k: load_model(str(dirs[k]), device="cpu") for k in ("sdar", "dream", "fastdllm", "llada")}


def test_families_and_their_decoding_facts(models):
    facts = {k: (a.model_type, a.logit_shift, a.attention, a.block_size) for k, a in models.items()}
    assert facts == {"sdar": ("sdar", 0, "block_causal", 4), "dream": ("Dream", 1, "full", None),
                     "fastdllm": ("Fast_dLLM_Qwen", 1, "block_causal", 4), "llada": ("llada", 0, "full", None)}


@pytest.mark.parametrize("family", ["dream", "fastdllm", "llada"])
def test_loading_is_strict(dirs, tmp_path, family):
    d = tmp_path / family
    shutil.copytree(dirs[family], d)
    w = load_file(str(d / "model.safetensors"))
    name = sorted(w)[3]
    w[name.replace(".weight", ".renamed")] = w.pop(name)
    save_file(w, str(d / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(ModelLoadError, match="do not match"):
        load_model(str(d), device="cpu")


def test_logit_shift_only_for_dream_and_fastdllm(models):
    ids = torch.tensor([1, 20, 21, 22, 3, 3])
    n = len(ids)
    for key, a in models.items():
        full = torch.ones(n, n, dtype=torch.bool)
        raw = a.model(input_ids=ids[None], attention_mask=full[None, None], position_ids=torch.arange(n)[None],
                      use_cache=False).logits[0]
        got = a.forward(ids, full, torch.arange(n))
        want = torch.cat([raw[:1], raw[:-1]]) if key in ("dream", "fastdllm") else raw
        assert torch.allclose(got, want, atol=1e-6), key


def direct_llada(original: dict, ids: torch.Tensor, heads: int = 2, theta: float = 500000.0) -> torch.Tensor:
    """LLaDA's forward computed straight from its published weight names: RMSNorm, RoPE, bidirectional attention,
    SwiGLU. (n,) ids -> (n, V) logits."""
    W = original
    x = W["model.transformer.wte.weight"][ids]
    n, d = x.shape
    hd = d // heads
    inv = 1.0 / theta ** (torch.arange(0, hd, 2).float() / hd)
    ang = torch.arange(n).float()[:, None] * inv[None]
    cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()
    rot = lambda t: torch.cat([-t[..., hd // 2:], t[..., :hd // 2]], -1)  # noqa: E731
    norm = lambda t, w: t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6) * w  # noqa: E731
    for b in range(2):
        p = f"model.transformer.blocks.{b}."
        h = norm(x, W[p + "attn_norm.weight"])
        q, k, v = ((h @ W[p + f"{c}_proj.weight"].T).view(n, heads, hd).transpose(0, 1) for c in "qkv")
        q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
        att = torch.softmax(q @ k.transpose(1, 2) / hd ** 0.5, -1) @ v                 # (heads, n, hd)
        x = x + att.transpose(0, 1).reshape(n, d) @ W[p + "attn_out.weight"].T
        h = norm(x, W[p + "ff_norm.weight"])
        gate, up = h @ W[p + "ff_proj.weight"].T, h @ W[p + "up_proj.weight"].T
        x = x + (torch.nn.functional.silu(gate) * up) @ W[p + "ff_out.weight"].T
    return norm(x, W["model.transformer.ln_f.weight"]) @ W["model.transformer.ff_out.weight"].T


def test_llada_renamed_equals_direct_computation(models, dirs):
    ids = torch.tensor([1, 20, 21, 3, 3, 3, 22])
    n = len(ids)
    got = models["llada"].forward(ids, torch.ones(n, n, dtype=torch.bool), torch.arange(n))
    assert torch.allclose(got, direct_llada(dirs["original"], ids), atol=1e-4)


def reference_llada_generate(a, prompt_ids, gen_length, block_length, steps):
    """LLaDA's generate.py (greedy, low-confidence remasking, blocks from the prompt's end, `steps` per block, the
    whole canvas every forward), written from its description; like the engine, [MASK] is never predicted."""
    x = torch.tensor(prompt_ids + [a.mask_token_id] * gen_length)
    P, n = len(prompt_ids), len(prompt_ids) + gen_length
    for b in range(gen_length // block_length):
        hi = P + (b + 1) * block_length                     # later blocks may not be committed yet
        quota = [block_length // steps + (j < block_length % steps) for j in range(steps)]
        for k in quota:
            logits = a.forward(x, torch.ones(n, n, dtype=torch.bool), torch.arange(n)).double()
            logits[:, a.mask_token_id] = float("-inf")
            p = torch.softmax(logits, -1)
            x0 = p.argmax(-1)
            conf = torch.where(x == a.mask_token_id, p.gather(-1, x0[:, None])[:, 0], torch.tensor(-1.0).double())
            conf[hi:] = -1.0
            sel = torch.topk(conf, k).indices
            x[sel] = x0[sel]
    return x[P:].tolist()


def test_llada_decoder_follows_generate_py(models):
    a = models["llada"]
    pol = build_decoder("llada", block_size=4, steps=2, gen_length=8, stop_at_eos=False)
    tr = Generation(a, PROMPT, pol).run()
    assert tr.meta.final_tokens[tr.meta.prompt_len:] == reference_llada_generate(a, tr.meta.prompt_ids, 8, 4, 2)
    assert tr.nfe == 4 and tr.meta.cache == "none" and tr.records[0].positions[0] == tr.meta.prompt_len


@pytest.mark.parametrize("family", ["sdar", "fastdllm"])
def test_cached_equals_uncached_for_block_causal_families(models, family):
    runs = [Generation(models[family], PROMPT, build_decoder("threshold", tau=0.5, block_size=4, gen_length=12,
                                                             stop_at_eos=False, use_cache=c)).run()
            for c in (True, False)]
    assert runs[0].meta.final_tokens == runs[1].meta.final_tokens
    for x, y in zip(runs[0].records, runs[1].records):
        assert torch.allclose(torch.from_numpy(x.confidence), torch.from_numpy(y.confidence), atol=1e-5)


@pytest.mark.parametrize("family", ["sdar", "dream", "fastdllm", "llada"])
def test_applicable_decoders_run_and_others_are_refused(models, family):
    a = models[family]
    for spec in ("ar", "llada", "threshold", "tspd", "s2d2"):
        params = dict(gen_length=8, block_size=1 if spec == "ar" else 4)
        if spec == "tspd":
            params["controller"] = "heuristic"
        if spec == "s2d2" and family not in ("sdar", "fastdllm"):       # S2D2 needs a block-causal model
            with pytest.raises(ConfigError, match="needs a block-causal model"):
                Generation(a, PROMPT, build_decoder(spec, **params))
            continue
        tr = Generation(a, PROMPT, build_decoder(spec, **params)).run()
        assert 1 <= tr.meta.generated_tokens <= 8 and tr.meta.attention == a.attention


def test_picker_offers_only_the_operators_models(dirs, tmp_path):
    from engine.errors import UserError
    from engine.harness.service import DecodeService
    from explorer.page.context import Page
    from explorer.page.controls import model_summary
    service = DecodeService(default_model=str(dirs["dream"]), max_seconds=10)
    info = service.model_info()
    assert info["family"] == "Dream" and info["decoders"]["s2d2"] and info["decoders"]["threshold"] is None
    card = model_summary(info)
    assert "~~s2d2~~" in card and "full attention" in card and "threshold" in card
    page = Page(service, {}, models=(str(dirs["dream"]),), model_infos={str(dirs["dream"]): info})
    assert page.check_model(None) == str(dirs["dream"])
    for hostile in (str(dirs["llada"]), "/etc", "GSAI-ML/LLaDA-8B-Instruct", "../assets/models"):
        with pytest.raises(UserError, match="not offered"):
            page.check_model(hostile)


def reference_prefix_cache_generate(a, prompt_ids, gen_length, block_length, steps):
    """Fast-dLLM's ``generate_with_prefix_cache`` (llada/generate.py; greedy, low-confidence, fixed steps), written
    from its description: per block, one forward over the whole canvas whose K/V before the block are kept, then
    forwards over [block start, end) against those K/V only; [MASK] is never predicted (as the engine)."""
    from transformers import DynamicCache
    x = torch.tensor(prompt_ids + [a.mask_token_id] * gen_length)
    P, n = len(prompt_ids), len(prompt_ids) + gen_length
    for b in range(gen_length // block_length):
        lo, hi = P + b * block_length, P + (b + 1) * block_length
        quota = [block_length // steps + (j < block_length % steps) for j in range(steps)]
        cache = DynamicCache(config=a.model.config)
        for j, k in enumerate(quota):
            if j == 0:
                logits = a.forward(x, torch.ones(n, n, dtype=torch.bool), torch.arange(n), cache)[lo:]
                cache.crop(lo - n)                        # keep the K/V of [0, lo) only
            else:
                logits = a.forward(x[lo:], torch.ones(n - lo, n, dtype=torch.bool), torch.arange(lo, n), cache)
                cache.crop(lo - n)
            logits = logits.double()
            logits[:, a.mask_token_id] = float("-inf")
            p = torch.softmax(logits, -1)
            x0 = p.argmax(-1)
            conf = torch.where(x[lo:] == a.mask_token_id, p.gather(-1, x0[:, None])[:, 0], torch.tensor(-1.0).double())
            conf[hi - lo:] = -1.0
            sel = torch.topk(conf, k).indices
            x[lo + sel] = x0[sel]
    return x[P:].tolist()


def test_llada_prefix_cache_follows_fast_dllm_and_is_refused_on_block_causal_models(models):
    a = models["llada"]
    pol = build_decoder("llada", block_size=4, steps=4, gen_length=12, stop_at_eos=False, kv_cache="prefix")
    tr = Generation(a, PROMPT, pol).run()
    assert tr.meta.final_tokens[tr.meta.prompt_len:] == reference_prefix_cache_generate(
        a, tr.meta.prompt_ids, 12, 4, 4)
    assert tr.nfe == 12 and tr.meta.cache.startswith("prefix")
    plain = Generation(a, PROMPT, build_decoder("llada", block_size=4, steps=4, gen_length=12, stop_at_eos=False)).run()
    gaps = [abs(x.confidence - y.confidence).max() for x, y in zip(tr.records, plain.records)]
    assert gaps[0] < 1e-6 and max(gaps) > 1e-6      # a block's first forward is exact; later ones read the prefix
    with pytest.raises(ConfigError, match="block-causal"):
        Generation(models["sdar"], PROMPT, build_decoder("threshold", kv_cache="prefix"))


def reference_prefix_cache_threshold(a, prompt_ids, gen_length, block_length, tau):
    """Fast-dLLM's ``generate_with_prefix_cache`` with ``threshold`` (its ``get_transfer_index``: the most
    confident masked slot of the block always, the others while their confidence is not below τ), from its
    description; forwards until the block has no masks."""
    from transformers import DynamicCache
    x = torch.tensor(prompt_ids + [a.mask_token_id] * gen_length)
    P, n = len(prompt_ids), len(prompt_ids) + gen_length
    for b in range(gen_length // block_length):
        lo, hi = P + b * block_length, P + (b + 1) * block_length
        cache, first = DynamicCache(config=a.model.config), True
        while (x[lo:hi] == a.mask_token_id).any():
            if first:
                logits = a.forward(x, torch.ones(n, n, dtype=torch.bool), torch.arange(n), cache)[lo:]
            else:
                logits = a.forward(x[lo:], torch.ones(n - lo, n, dtype=torch.bool), torch.arange(lo, n), cache)
            cache.crop(lo - n)
            first = False
            logits = logits.double()
            logits[:, a.mask_token_id] = float("-inf")
            p = torch.softmax(logits, -1)
            x0 = p.argmax(-1)
            masked = (x[lo:] == a.mask_token_id) & (torch.arange(n - lo) < hi - lo)
            conf = torch.where(masked, p.gather(-1, x0[:, None])[:, 0], torch.tensor(float("-inf")).double())
            order = torch.argsort(conf, descending=True)[: int(masked.sum())]
            keep = [int(order[0])] + [int(i) for i in order[1:] if conf[i] >= tau]
            x[lo + torch.tensor(keep)] = x0[torch.tensor(keep)]
    return x[P:].tolist()


@pytest.mark.parametrize("tau", [0.3, 0.9])
def test_llada_threshold_with_prefix_cache_follows_fast_dllm(models, tau):
    a = models["llada"]
    pol = build_decoder("threshold", tau=tau, block_size=4, gen_length=12, stop_at_eos=False, kv_cache="prefix")
    tr = Generation(a, PROMPT, pol).run()
    assert tr.meta.final_tokens[tr.meta.prompt_len:] == reference_prefix_cache_threshold(
        a, tr.meta.prompt_ids, 12, 4, tau)


def test_shifted_model_with_a_first_block_at_position_zero(models):
    """A prompt shorter than the block: the first block starts at 0 and has no row before it to keep cached."""
    a = models["fastdllm"]
    ids = a.encode_prompt(PROMPT)
    B = 32
    assert len(ids) < B
    cached = Generation(a, ids, build_decoder("threshold", tau=0.5, block_size=B, gen_length=40, stop_at_eos=False)).run()
    plain = Generation(a, ids, build_decoder("threshold", tau=0.5, block_size=B, gen_length=40, stop_at_eos=False,
                                             use_cache=False)).run()
    assert cached.generated_ids == plain.generated_ids


def test_each_need_refuses_a_model_that_lacks_it_with_its_reason():
    """engine.catalogue.applies against what each model kind offers (ModelAdapter.offers / CanvasAdapter.offers)."""
    from types import SimpleNamespace

    from engine.catalogue.applies import why_not
    from engine.models.model import CanvasAdapter, ModelAdapter

    def model(kind, shift=0, cls=ModelAdapter):
        ns = SimpleNamespace(name="m", model_type=kind, attention=kind, logit_shift=shift)
        ns.offers = lambda: cls.offers(ns)
        return ns
    sdar, llada, dream = model("block_causal"), model("full"), model("full", shift=1)
    gemma = model("canvas", cls=CanvasAdapter)
    assert why_not("threshold", sdar) is None and why_not("threshold", dream) is None
    assert "fills [MASK] slots" in why_not("threshold", gemma) and why_not("uniform", gemma) is None
    assert "uniform-noise canvas" in why_not("uniform", sdar)
    assert "block-causal" in why_not("s2d2", llada) and why_not("s2d2", sdar) is None
    assert "full-attention" in why_not("dream", sdar) and why_not("dream", dream) is None
    assert "position-aligned" in why_not("simsd", model("block_causal", shift=1))
