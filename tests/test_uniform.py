"""DiffusionGemma's uniform-noise canvas: the `uniform` decoder against transformers' own `generate`."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.decoders import build_decoder
from engine.errors import ConfigError
from engine.runtime.loop import Generation
from engine.models.model import load_model
from tests.families import write_diffusion_gemma
from engine.decoders.uniform.card import UniformSummary

# generation configs: DiffusionGemma's defaults, a permissive bound that stops early, no stability requirement
CONFIGS = {"strict": dict(confidence_threshold=0.005, sampler_config={"entropy_bound": 0.1,
                                                                        "_cls_name": "EntropyBoundSamplerConfig"}),
           "stops": dict(confidence_threshold=2.5, stability_threshold=2),
           "unstable": dict(confidence_threshold=3.0, stability_threshold=0, t_min=0.2, t_max=1.5)}


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def dg(request, tmp_path_factory):
    path = write_diffusion_gemma(tmp_path_factory.mktemp("dg") / request.param, generation=CONFIGS[request.param])
    return load_model(str(path))


def reference(a, ids: list[int], seed: int, gen_length: int) -> list[int]:
    torch.manual_seed(seed)
    out = a.model.generate(torch.tensor([ids]), max_new_tokens=gen_length).sequences[0, len(ids):].tolist()
    stops = [i for i, t in enumerate(out) if t in a.stop_ids]
    return out[:stops[0] + 1] if stops else out


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_uniform_gives_generates_tokens(dg, seed):
    ids = dg.encode_prompt("what is 12 + 30 ?")
    trace = Generation(dg, ids, build_decoder("uniform", seed=seed, gen_length=20)).run()
    assert trace.generated_ids == reference(dg, ids, seed, 20)      # 20 -> three canvases of 8, as generate makes
    drafts = [r for r in trace.records if r.kind == "draft"]
    assert trace.meta.nfe_paper == len(drafts) and trace.meta.nfe_by_kind["encode"] == len(trace.generated_ids) // 8 + (
        len(trace.generated_ids) % 8 > 0)


def test_records_carry_the_canvas_the_bound_and_the_stopping_test(dg):
    trace = Generation(dg, dg.encode_prompt("what is 1 + 2 ?"), build_decoder("uniform", seed=3, gen_length=16)).run()
    c = trace.meta.own(UniformSummary)
    steps = [r for r in trace.records if r.kind == "draft"]
    for prev, r in zip(trace.records, trace.records[1:]):
        if r.kind != "draft":
            continue
        assert (r.tokens_before == prev.tokens_after).all()                  # the canvas fed is the last one made
        acc = r.committed
        order = np.argsort(r.field("eb_order"))
        bound = r.field("eb_bound")
        assert acc.sum() == (bound <= c.entropy_bound).sum() >= 1         # the lowest-entropy slot always
        assert acc[order[: int(acc.sum())]].all()                             # accepted = the sorted prefix
        final = r is steps[-1] or trace.records[trace.records.index(r) + 1].kind == "encode"
        if not final:
            assert (r.tokens_after[acc] == r.field("denoised")[acc]).all()    # kept samples, the rest is noise
        else:
            assert (r.tokens_after == r.candidate).all()                      # the output is the argmax canvas
        assert c.t_min - 1e-6 <= r.field("temperature") <= c.t_max + 1e-6      # float32, as generate
    temps = [r.field("temperature") for r in steps if r.block == 0]
    assert temps == sorted(temps, reverse=True)                                # t_max -> t_min


def test_parameters_override_the_generation_config_and_others_are_refused(dg):
    ids = dg.encode_prompt("what is 1 + 2 ?")
    tr = Generation(dg, ids, build_decoder("uniform", seed=0, gen_length=8, max_denoising_steps=3, t_min=0.1,
                                           t_max=0.3, stability_threshold=0)).run()
    assert len([r for r in tr.records if r.kind == "draft"]) <= 3
    assert tr.meta.own(UniformSummary).t_max == 0.3 and tr.meta.params["max_denoising_steps"] == 3
    with pytest.raises(ConfigError, match="uniform"):
        Generation(dg, ids, build_decoder("threshold"))
    with pytest.raises(ConfigError, match="t_max"):
        build_decoder("uniform", t_min=0.5, t_max=0.4)
    with pytest.raises(ConfigError, match="t_max"):
        Generation(dg, ids, build_decoder("uniform", t_min=2.0))             # above the model's t_max


def test_uniform_is_refused_on_masked_models(adapter):
    with pytest.raises(ConfigError, match="masked-diffusion"):
        Generation(adapter, [1, 5, 6], build_decoder("uniform"))


def test_bench_counts_denoising_steps_and_renoised_share(dg):
    from engine.harness.bench import run_bench
    (row,) = run_bench(dg, "arith", 3, ["uniform:gen_length=8"])
    traces = []
    run_bench(dg, "arith", 3, ["uniform:gen_length=8"], on_trace=lambda *a: traces.append(a[-1]))
    steps = [r for t in traces for r in t.records if r.kind == "draft"]
    assert row["denoise_steps_per_canvas"] == len(steps) / 3            # one canvas of 8 per problem
    assert row["renoised_share"] == sum((~r.committed).sum() for r in steps) / (8 * len(steps))
    assert row["nfe_paper"] == len(steps) / 3 and row["nfe"] == row["nfe_paper"] + 1


def test_the_uniform_trainer_resumes_from_its_checkpoint(tmp_path):
    """Re-running the same command continues: step and consumed time come back from ckpt.pt (shared with
    tools.training.train's resume). In one process too: the generation defaults were mutated by the first run."""
    from tools.training import train_uniform
    args = ["--out", str(tmp_path), "--task", "arith", "--minutes", "5", "--eval-every", "1000", "--batch", "2"]
    train_uniform.main(args + ["--max-steps", "2"])
    train_uniform.main(args + ["--max-steps", "3"])
    state = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    assert int(state["step"]) == 3 and (tmp_path / "model" / "config.json").exists()


def test_the_model_settles_a_copy_of_the_config_and_a_bad_generation_config_is_its_error(tmp_path):
    """catalogue.settle: the checkpoint's values fill the parameters left at 0 in a new config, checked against the
    catalogue's ranges; the validated config the visitor's values made stays as it was."""
    a = load_model(str(write_diffusion_gemma(tmp_path / "ok", generation=CONFIGS["unstable"])))
    policy = build_decoder("uniform", gen_length=20)
    given = policy.cfg
    settled = policy.settle(a)
    assert (given.max_denoising_steps, given.t_max, given.block_size, given.gen_length) == (0, 0.0, 8, 20)
    assert (settled.t_min, settled.t_max, settled.block_size, settled.gen_length) == (0.2, 1.5, 8, 24)
    assert settled.stability_threshold == 0 and settled.max_denoising_steps > 0
    bad = load_model(str(write_diffusion_gemma(tmp_path / "bad", generation=dict(t_max=9.0))))   # t_max ≤ 5
    with pytest.raises(ConfigError, match="generation config: t_max must be in"):
        Generation(bad, bad.encode_prompt("what is 1 + 2 ?"), build_decoder("uniform"))


def test_the_embedded_uniform_model_answers_the_pages_arithmetic_prompts():
    """The page's canvas link opens an arithmetic prompt on unmask-uniform-small: under the decoder's defaults (the
    model's generation config, seed 0) its answer to the page's first arithmetic example is right, and to at least
    two of the three (it is right on 0.875 of 200 held-out problems, so one miss in three is no regression; the
    first weights, trained on arithmetic alone from scratch, were right on 0.18; docs/results.md)."""
    from engine.tasks import get_task
    a = load_model("unmask-uniform-small", device="cpu")
    probs = get_task("arith").problems("test", 3, seed=0)     # the arithmetic held_out gives a mix model
    verdicts = [get_task("arith").verdict(Generation(a, p.prompt, build_decoder("uniform")).run().meta.text, p)
                for p in probs]
    assert len(probs) == 3 and verdicts[0] == "valid" and verdicts.count("valid") >= 2, verdicts


def test_the_sdar_mapping_keeps_embedding_norm_and_head_exact_and_starts_the_unmapped_parts_silent():
    """tools.training.uniform_from_sdar: with every SDAR sublayer silent (o_proj and down_proj zero) the mapped
    DiffusionGemma's logits are SDAR's (the embedding's rescaling is undone by the final norm, the head is tied), which
    needs its calibrated post-norms at zero; the experts and, with last_attn off, the last attention start silent."""
    from transformers import DiffusionGemmaForBlockDiffusion, DynamicCache, Qwen3ForCausalLM
    from engine.tasks import get_task
    from tools.training import uniform_from_sdar as m
    from tools.training.train import model_config, task_tokenizer
    task = get_task("mix")
    tok = task_tokenizer(task)
    torch.manual_seed(0)
    sdar = Qwen3ForCausalLM(model_config(len(tok), 2, 64, dict(pad_token_id=tok.pad_token_id,
                                         bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id))).eval()
    with torch.no_grad():
        sdar.model.embed_tokens.weight.mul_(50)       # RMS about 1: the norms' eps (1e-6) is then below the tolerance
        for layer in sdar.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
    gemma = DiffusionGemmaForBlockDiffusion(m.gemma_config(sdar.config, tok, 8, softcap=1e6)).eval()
    m.map_weights(sdar, gemma, m.calibrate(sdar, tok, task, 2, 0), last_attn=False)
    ids = torch.tensor([[tok.bos_token_id, 5, 6, 7, 8]])
    with torch.no_grad():
        cache = DynamicCache(config=gemma.config.get_text_config(decoder=True))
        got = gemma.lm_head(gemma.model.encoder(input_ids=ids, cache=cache).last_hidden_state)
        torch.testing.assert_close(got, sdar(ids).logits, rtol=1e-4, atol=1e-4)
    layers = gemma.model.decoder.layers
    assert all(float(gl.post_feedforward_layernorm_2.weight.abs().max()) == 0 for gl in layers)
    assert float(layers[-1].post_attention_layernorm.weight.abs().max()) == 0
