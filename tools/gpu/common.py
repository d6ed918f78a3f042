"""What every GPU measurement shares beyond ``tools.bench`` (its clock, timing, settings switch and progress lines):
one shaped-model builder, the forward paths' settings, the GPU's warm-up and kernel time, and the version check.

Random weights of a real model's shape stand in for its checkpoint (none can be downloaded to a lent GPU machine):
they cost the same per forward, and their rows past the task tokenizer's vocabulary are zeroed so every decoded id
is a real token.
"""

from __future__ import annotations

import dataclasses
import re
import time
from importlib import metadata

import torch

from tools.bench.clock import now

# shapes: hidden width, layers, attention heads, K/V heads, MLP width, vocabulary (None: the task tokenizer's)
LLADA_8B = dict(hidden=4096, layers=32, heads=32, kv=32, mlp=12288, vocab=126_464)
FEW_LAYERS = dict(LLADA_8B, layers=4)              # the compiled forward's check: an 8B's width, a few layers
TINY = dict(hidden=64, layers=2, heads=2, kv=2, mlp=128, vocab=4096)
HBM_BYTES_PER_S = 4.8e12                           # the H200's datasheet bandwidth (H100: 3.35e12)
KINDS = {  # kind: (transformers class names, attention, block size, logit shift)
    "llada": ("LlamaConfig", "LlamaForCausalLM", "full", None, 0),
    "sdar": ("Qwen3Config", "Qwen3ForCausalLM", "block_causal", 4, 0),
    "fast_dllm_v2": ("Qwen2Config", "Qwen2ForCausalLM", "block_causal", 32, 1),
}


def shaped_adapter(shape: dict, device, dtype, kind: str = "llada", seed: int = 0, name: str = ""):
    """A random model of ``shape`` in ``kind``'s layout (``KINDS``) as an engine adapter with the task tokenizer."""
    import transformers

    from engine.models.model import ModelAdapter
    from engine.tasks import get_task, task_tokenizer
    tok = task_tokenizer(get_task("mix"))
    cfg_name, cls_name, attention, block, shift = KINDS[kind]
    head_dim = 128 if shape["hidden"] >= 1024 else max(16, shape["hidden"] // shape["heads"])
    cfg = getattr(transformers, cfg_name)(
        vocab_size=shape.get("vocab") or len(tok), hidden_size=shape["hidden"], num_hidden_layers=shape["layers"],
        num_attention_heads=shape["heads"], num_key_value_heads=shape["kv"], intermediate_size=shape["mlp"],
        head_dim=head_dim, max_position_embeddings=4096, tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 5e5})
    torch.manual_seed(seed)
    with torch.device(device):
        model = getattr(transformers, cls_name)(cfg).to(dtype).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(8.0)               # a spread of confidences, as a trained model has
        model.lm_head.weight[len(tok):] = 0          # ids past the tokenizer's never win: decoded text stays text
    for m in model.modules():                        # RoPE tables stay fp32 (engine/models/precision.py)
        if hasattr(m, "inv_freq"):
            m.inv_freq = m.inv_freq.float()
    return ModelAdapter(model=model, tokenizer=tok, name=name or f"random-{kind}-{shape['hidden']}x{shape['layers']}",
                        model_type=kind, mask_token_id=tok.mask_token_id, logit_shift=shift, attention=attention,
                        block_size=block, stop_ids=(), attn_impl="sdpa", device=torch.device(device), dtype=dtype,
                        prompt_template="Q : {} A :")


def block_causal(adapter, block: int | None = None):
    """The same weights read block-causally (SDAR's layout): the block-causal rules' model."""
    return dataclasses.replace(adapter, attention="block_causal", block_size=block or adapter.block_size,
                               name=adapter.name + " (block-causal)")


STATIC = dict(UNMASK_STATIC="on", UNMASK_CUDA_GRAPHS="1", UNMASK_COMPILE="off")
NO_GRAPHS = dict(UNMASK_STATIC="on", UNMASK_CUDA_GRAPHS="0", UNMASK_COMPILE="off")
EAGER = dict(UNMASK_STATIC="off", UNMASK_COMPILE="off")
COMPILED = dict(UNMASK_STATIC="on", UNMASK_CUDA_GRAPHS="1", UNMASK_COMPILE="on")


def warm_up(device) -> None:
    """A GPU's clocks idle low: three seconds of matrix products before anything is timed."""
    if torch.device(device).type == "cuda":
        a, t0 = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16), time.perf_counter()
        while time.perf_counter() - t0 < 3:
            a @ a
            torch.cuda.synchronize()


def kernel_ms(fn, reps: int = 5) -> float:
    """The GPU's own ms per call, its kernels' times summed over device rows only (torch's profiler's own rule: a
    CPU op's row repeats its kernels' time): how long the device would be busy if the host never paused."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    return sum(e.self_device_time_total for e in prof.key_averages() if e.device_type == DeviceType.CUDA) / 1e3 / reps


def decode(adapter, prompt, spec: str, load=None, **extra) -> dict:
    """``spec`` on ``prompt`` after a warm-up decode (graphs captured, buckets met): tokens/s, ms per forward, the
    forward paths and the ids."""
    from engine.decoders import build_decoder, parse_spec
    from engine.runtime.loop import Generation
    name, params = parse_spec(spec)
    pol = lambda: build_decoder(name, **{"stop_at_eos": False, **params, **extra})              # noqa: E731
    Generation(adapter, prompt, pol(), load=load).run()
    t0 = now()
    tr = Generation(adapter, prompt, pol(), load=load).run()
    wall = now() - t0
    return dict(spec=spec, nfe=tr.nfe, tokens=tr.meta.generated_tokens, tokens_per_s=tr.meta.generated_tokens / wall,
                ms_per_forward=1e3 * wall / tr.nfe, path=tr.meta.forward_path, ids=tr.meta.token_ids, trace=tr)


def pins() -> dict[str, str]:
    """torch's and transformers' versions as requirements.txt pins them."""
    from tools.provenance import ROOT
    text = (ROOT / "requirements.txt").read_text()
    return {m[1]: m[2] for m in re.finditer(r"^(torch|transformers)==([\w.]+)", text, re.M)}


def versions_line() -> str:
    """One line naming the libraries that differ from the pins (a GPU image's may be older), or ''."""
    differ = []
    for name, pinned in pins().items():
        have = metadata.version(name).split("+")[0]
        if have != pinned:
            differ.append(f"{name} {have} (pinned {pinned})")
    return ("running with " + ", ".join(differ) + ": figures are for these versions") if differ else ""
