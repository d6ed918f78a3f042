"""Model adapters: one forward contract over stock transformers classes, loaded from local files only.

    adapter.forward(input_ids (1, q), mask (q, kv) bool, position_ids (q,), cache) -> logits (q, V)

Per-model attributes: ``logit_shift`` (0 = position-aligned, 1 = the logit for i is read at i - 1),
``attention`` (block-causal or full), ``mask_token_id``, training ``block_size`` (if any), ``stop_ids``. A family is
one entry of ``engine.models.families.FAMILIES`` (config builder, class, key renames), not a new code path.
No ``trust_remote_code`` anywhere: remote code is never executed.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import torch
from huggingface_hub.errors import StrictDataclassError
from safetensors import SafetensorError
from transformers import AutoTokenizer, DynamicCache
from transformers.utils import logging as hf_logging

from engine.errors import ConfigError, ModelLoadError
from engine.models import precision
from engine.models.families import FAMILIES, Family
from engine.models import masks, ragged

TASK_NAMES = ("arith", "story", "picks", "mix", "parallel")    # embedded task models take "Q : ... A :" prompts
ASSETS = Path(__file__).resolve().parents[2] / "assets"
DEFAULT_MODEL = "unmask-arith-tiny"
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+(@[\w.-]+)?$")


def pick_device(requested: str | None = None) -> torch.device:
    if requested:
        return torch.device(requested)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def embedded_models() -> list[str]:
    """The models shipped under assets/models: the catalogue's one list (``catalogue.embedded_names``)."""
    from engine.catalogue.catalogue import embedded_names
    return embedded_names()


def downloads_allowed() -> bool:
    """Downloads happen only when the operator allows them (UNMASK_ALLOW_DOWNLOAD=1, or --allow-download)."""
    return os.environ.get("UNMASK_ALLOW_DOWNLOAD", "") == "1"


def from_hub(spec: str, allow_download: bool) -> Path:
    """'owner/name' or 'owner/name@revision' -> a local snapshot, from the cache or (if allowed) downloaded."""
    repo, _, revision = spec.partition("@")
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError
    try:
        return Path(snapshot_download(repo, revision=revision or None, local_files_only=not allow_download,
                                      allow_patterns=["*.json", "*.safetensors", "*.txt", "*.model", "*.jinja"]))
    except (LocalEntryNotFoundError, HfHubHTTPError, OSError, ValueError) as e:
        how = "downloading failed" if allow_download else "it is not in the local cache and downloads are off " \
                                                          "(--allow-download / UNMASK_ALLOW_DOWNLOAD=1)"
        raise ModelLoadError(f"model {spec!r}: {how} ({type(e).__name__})") from None


def resolve_model_path(name_or_path: str | None, allow_download: bool | None = None) -> Path:
    """'tiny' / None -> the default embedded model; an embedded model's name; an existing directory; or a hub id
    (``id@revision`` pins a revision) from the local cache, downloaded only where allowed."""
    if not name_or_path or name_or_path in ("tiny", DEFAULT_MODEL):
        path = ASSETS / "models" / DEFAULT_MODEL
    elif name_or_path in embedded_models():
        path = ASSETS / "models" / name_or_path
    elif Path(name_or_path).expanduser().is_dir():
        path = Path(name_or_path).expanduser().resolve()
    elif HUB_ID.match(name_or_path):
        path = from_hub(name_or_path, downloads_allowed() if allow_download is None else allow_download)
    else:
        raise ModelLoadError(f"unknown model {str(name_or_path)[:80]!r}: give an embedded model's name, a local "
                             "directory or a hub id")
    if not (path / "config.json").is_file():
        raise ModelLoadError(f"{path.name} has no config.json")
    return path


@dataclass
class ModelAdapter:
    model: torch.nn.Module
    tokenizer: object
    name: str
    model_type: str
    mask_token_id: int
    logit_shift: int
    attention: str
    block_size: int | None
    stop_ids: tuple[int, ...]
    attn_impl: str
    device: torch.device
    dtype: torch.dtype
    prompt_template: str | None = None   # "Q : {} A :" for the embedded task models
    path: Path | None = None             # the model directory (decoders read fitted side files from it)
    info: dict = field(default_factory=dict)
    ragged = True                        # sdpa attention runs through engine.models.ragged's wrapper

    def __post_init__(self):
        params = inspect.signature(self.model.forward).parameters
        # transformers 5.2x renamed past_key_values -> cache; 5.0 only knows the old name
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        if self.ragged:
            ragged.install(self.model)       # batched rounds pass their layout to the forward (engine.models.ragged)

    @property
    def vocab_size(self) -> int:
        return self.model.config.get_text_config().vocab_size

    def offers(self) -> frozenset[str]:
        """What a decoder's ``needs`` (engine.catalogue.applies) may ask of this model: its attention kind, [MASK]
        slots to fill, and position-aligned logits."""
        return frozenset({self.attention, "mask_slots"} | ({"no_shift"} if not self.logit_shift else set()))

    @classmethod
    def mask_id_of(cls, raw: dict, tok):
        """The checkpoint's [MASK] id (config.json, else the tokenizer's); None if it has none."""
        return raw.get("mask_token_id", getattr(tok, "mask_token_id", None))

    @classmethod
    def meta_of(cls, path: Path) -> dict:
        """What this kind of model reads from its checkpoint besides the weights (nothing for a masked model)."""
        return {}

    def new_cache(self) -> DynamicCache:
        return DynamicCache(config=self.model.config)

    @torch.no_grad()
    def forward(self, input_ids: torch.Tensor, mask: torch.Tensor, position_ids: torch.Tensor,
                cache: DynamicCache | None = None) -> torch.Tensor:
        """input_ids (q,), mask (q, cache_len + q) bool, position_ids (q,) -> logits (q, V) float32 on the device."""
        return self.own_rows(self.run(input_ids[None], mask, position_ids[None], cache)[0])

    @torch.no_grad()
    def run(self, input_ids: torch.Tensor, mask: torch.Tensor, position_ids: torch.Tensor,
            cache: DynamicCache | None = None, **extra) -> torch.Tensor:
        """The model on (B, Q) ids and position ids with a (Q, K) or (B, Q, K) bool mask -> (B, Q, V) float32 logits
        on the model's device, row i the model's own (unshifted): the scheduler copies to the host only what a
        decoder reads there (``engine.runtime.scheduler``). ``extra``: keyword arguments the model passes to
        attention."""
        am = masks.to_backend(mask, self.attn_impl, self.dtype, self.device)
        kw = {self._cache_kw: cache} if cache is not None else {}
        out = self.model(input_ids=input_ids.to(self.device), attention_mask=am,
                         position_ids=position_ids.to(self.device), use_cache=cache is not None, **kw, **extra)
        return out.logits.float()

    def own_rows(self, logits: torch.Tensor) -> torch.Tensor:
        """(q, V) rows as the model returns them -> slot j's logits at row j (a shifted model reads them at j - 1)."""
        return torch.cat([logits[:1], logits[:-1]], 0) if self.logit_shift else logits

    def encode_prompt(self, text: str, chat: bool = True) -> list[int]:
        """Prompt text -> ids with the model's own format (task template, or the tokenizer's chat template; with
        ``chat`` False, a chat model's tokenizer takes the text plainly)."""
        tok = self.tokenizer
        if self.prompt_template is not None:
            body = text.strip()
            if not body.startswith("Q :") and not body.startswith("Q:"):
                body = self.prompt_template.format(body)
            return [tok.bos_token_id] + tok(body, add_special_tokens=False).input_ids
        if chat and getattr(tok, "chat_template", None):
            ids = tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                          tokenize=True)
            return list(ids["input_ids"] if hasattr(ids, "keys") else ids)   # a BatchEncoding on 5.x
        return tok(text).input_ids

    def encode_chat(self, messages: list[dict]) -> list[int]:
        """A ParallelBench chat (worked examples as earlier turns) -> ids as its models make them: the chat template
        rendered to text, then the text tokenized with the tokenizer's special tokens (a template that writes its
        own BOS gets a second one there, and so here). A lone question to a model without a chat template: its
        own prompt format."""
        tok = self.tokenizer
        if self.prompt_template is not None or not getattr(tok, "chat_template", None):
            if len(messages) == 1:
                return self.encode_prompt(messages[0]["content"])
            raise ConfigError(f"{self.name} has no chat template: a chat with worked examples needs one "
                              "(bench --zero-shot sends the question alone)")
        return list(tok(tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)).input_ids)

    def unknown_words(self, text: str, ids: list[int] | None = None) -> list[str]:
        """The words of `text` the tokenizer maps to [UNK] (distinct, in order). ``ids``: the text's prompt
        encoding, when known: without an [UNK] among them there is none to find (a word the vocabulary lacks is
        [UNK] wherever it stands), so the text is not tokenized a second time."""
        tok = self.tokenizer
        if tok.unk_token_id is None or (ids is not None and tok.unk_token_id not in ids):
            return []
        enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        words = [text[a:b] for t, (a, b) in zip(enc.input_ids, enc.offset_mapping) if t == tok.unk_token_id]
        return list(dict.fromkeys(words))

    def token_strings(self, ids) -> list[str]:
        return [s if s is not None else "?" for s in self.tokenizer.convert_ids_to_tokens([int(i) for i in ids])]

    def decode(self, ids) -> str:
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=True)


@dataclass
class CanvasAdapter(ModelAdapter):
    """DiffusionGemma (a family of attention kind ``canvas``): ``encode`` runs the encoder over uncached tokens into the cache
    (the prompt, then each finished canvas); ``denoise`` runs the decoder over a canvas against that cache. The
    masks come from the model's own builders, called as its ``generate`` calls them, so the logits are the ones
    ``generate`` sees. ``info["generation"]``: the checkpoint's generation-config defaults."""
    ragged = False                       # its forwards run alone (engine.runtime.scheduler.Call)

    def offers(self) -> frozenset[str]:
        return frozenset({"canvas"} | ({"no_shift"} if not self.logit_shift else set()))   # no [MASK] slots

    @classmethod
    def mask_id_of(cls, raw: dict, tok):
        """A canvas model has no [MASK]: the id (its pad, unless named) only marks slots not yet generated."""
        mask_id = super().mask_id_of(raw, tok)
        return mask_id if isinstance(mask_id, int) else tok.pad_token_id

    @classmethod
    def meta_of(cls, path: Path) -> dict:
        return {"generation": generation_defaults(path)}

    def new_cache(self) -> DynamicCache:
        return DynamicCache(config=self.model.config.get_text_config(decoder=True))

    @torch.no_grad()
    def encode(self, ids: torch.Tensor, start: int, cache: DynamicCache) -> DynamicCache:
        """ids (n,) at positions start..start+n -> the cache, extended by their K/V (causal)."""
        n, dev = len(ids), self.device
        pos = torch.arange(start, start + n, dtype=torch.int32, device=dev)[None]              # (1, n)
        enc = self.model.model.encoder
        masks_ = enc.create_masks_for_generate(
            config=self.model.config, inputs_embeds=torch.empty((1, n, 0), dtype=self.model.dtype, device=dev),
            attention_mask=torch.ones(1, start + n, dtype=torch.bool, device=dev), cache=cache, position_ids=pos,
            mm_token_type_ids=None)
        return enc(input_ids=ids[None].to(dev), attention_mask=masks_, cache=cache, position_ids=pos).cache

    def conditioning(self, logits: torch.Tensor) -> torch.Tensor:
        """A step's tempered logits as the next step's self-conditioning input (the embeddings' dtype)."""
        return logits.to(self.model.model.decoder.embed_tokens.weight.dtype)

    @torch.no_grad()
    def denoise(self, canvas: torch.Tensor, start: int, cache: DynamicCache,
                self_conditioning: torch.Tensor | None) -> torch.Tensor:
        """canvas (C,) at positions start..start+C, the previous step's logits (C, V) or None -> logits (C, V)
        float32 on the model's device (soft-capped, as the model returns them)."""
        C, dev = len(canvas), self.device
        x = canvas[None].to(dev)                                                               # (1, C)
        masks_ = self.model.model.decoder.create_diffusion_decoder_attention_mask(
            config=self.model.config, inputs_embeds=x.unsqueeze(-1), cache=cache,
            decoder_attention_mask=torch.ones(1, start + C, dtype=torch.bool, device=dev))
        pos = torch.arange(start, start + C, dtype=torch.int32, device=dev)[None]
        sc = None if self_conditioning is None else self_conditioning[None]
        out = self.model(decoder_input_ids=x, self_conditioning_logits=sc, decoder_attention_mask=masks_,
                         cache=cache, decoder_position_ids=pos)
        return out.logits[0]


ADAPTERS = {"canvas": CanvasAdapter}    # a family's attention kind -> its adapter class (the rest: ModelAdapter)


def generation_defaults(path: Path) -> dict:
    """The uniform decoder's defaults: the checkpoint's generation_config.json over DiffusionGemma's own."""
    from transformers import DiffusionGemmaGenerationConfig
    out = dict(DiffusionGemmaGenerationConfig._get_default_generation_params())
    try:
        raw = json.loads((path / "generation_config.json").read_text())
    except (OSError, ValueError):
        raw = {}
    raw = raw if isinstance(raw, dict) else {}
    out.update({k: raw[k] for k in out if raw.get(k) is not None})
    sc = raw.get("sampler_config")
    bound = sc.get("entropy_bound") if isinstance(sc, dict) else getattr(out["sampler_config"], "entropy_bound")
    keys = ("max_denoising_steps", "t_min", "t_max", "stability_threshold", "confidence_threshold")
    return dict({k: out[k] for k in keys}, entropy_bound=bound)


def one_line(e: Exception, limit: int = 300) -> str:
    return " ".join(str(e).split())[:limit]


def read_config(path: Path) -> dict:
    try:
        raw = json.loads((path / "config.json").read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ModelLoadError(f"{path / 'config.json'} is unreadable: {e}") from None
    if not isinstance(raw, dict):
        raise ModelLoadError(f"{path / 'config.json'} is not a JSON object")
    if raw.get("model_type") not in FAMILIES:
        raise ModelLoadError(f"model_type {str(raw.get('model_type'))[:40]!r} is not supported; "
                             f"supported: {', '.join(FAMILIES)}")
    return raw


def build_config(fam: Family, raw: dict):
    try:
        return fam.config_cls(**fam.config_map(raw))
    except (TypeError, ValueError, KeyError, StrictDataclassError) as e:  # a field of the wrong type or value
        raise ModelLoadError(f"config.json does not describe a {raw['model_type']} model: {one_line(e)}") from None


def fingerprint(path: Path) -> str:
    """sha256 over the contents of every file a decode reads (config, weights, tokenizer, side files such as
    ce.json and the TSPD controller): changing any of them in place changes the id, so cached traces of the old
    files are never served. Computed once, at load."""
    h = hashlib.sha256()
    for f in sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith(".")):
        h.update(f.name.encode() + b"\0")
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()[:16]


def stop_ids_of(path: Path, raw: dict, tok) -> tuple[int, ...]:
    """Stop ids from config.json and generation_config.json (never from token strings)."""
    ids: list[int] = []
    sources = [raw, raw.get("text_config")]
    try:
        sources.append(json.loads((path / "generation_config.json").read_text()))
    except (OSError, ValueError):
        pass
    for src in sources:
        stop = src.get("eos_token_id") if isinstance(src, dict) else None
        for t in (stop if isinstance(stop, list) else [stop]):
            if isinstance(t, int) and t not in ids:
                ids.append(t)
    if not ids and tok.eos_token_id is not None:
        ids.append(tok.eos_token_id)
    return tuple(ids)


def load_model(name_or_path: str | None = None, device: str | None = None, attn_impl: str = "sdpa",
               dtype: torch.dtype | None = None, allow_download: bool | None = None) -> ModelAdapter:
    path = resolve_model_path(name_or_path, allow_download)
    raw = read_config(path)
    if attn_impl not in ("sdpa", "eager"):
        raise ModelLoadError(f"attn_impl must be sdpa or eager, not {attn_impl!r}")
    fam = FAMILIES[raw["model_type"]]
    dev = pick_device(device)
    dtype = dtype or (torch.bfloat16 if dev.type == "cuda" else torch.float32)
    config = build_config(fam, raw)
    hf_logging.set_verbosity_error()   # the stock class warns that model_type "sdar" is not "qwen3": expected
    hf_logging.disable_progress_bar()
    try:
        # safetensors only (a pickled .bin is never opened); load with the dtype, not .to() afterwards: casting
        # after construction also casts RoPE inv_freq
        model, info = fam.model_cls.from_pretrained(
            path, config=config, dtype=dtype, attn_implementation=attn_impl, trust_remote_code=False,
            use_safetensors=True, key_mapping=fam.key_mapping or None, output_loading_info=True)
        tok = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
    except (OSError, ValueError, RuntimeError, TypeError, KeyError, SafetensorError) as e:
        raise ModelLoadError(f"cannot load weights/tokenizer from {path.name}: {one_line(e)}") from None
    loose = [k for k in ("missing_keys", "unexpected_keys", "mismatched_keys") if info.get(k)]
    if loose:  # strict: every weight of the stock class comes from the checkpoint, and nothing is left over
        raise ModelLoadError(f"{path.name}: weights do not match the {fam.name} layout: " + "; ".join(
            f"{k} {sorted(map(str, info[k]))[:4]}" for k in loose))
    precision.apply(model, fam.name, dtype, attn_impl)     # the reference's fp32 islands (engine/models/precision.py)
    model.to(dev).eval()
    cls = ADAPTERS.get(fam.attention, ModelAdapter)
    mask_id = cls.mask_id_of(raw, tok)
    if not isinstance(mask_id, int):
        raise ModelLoadError(f"{path.name}: no integer mask_token_id in config.json or tokenizer")
    stop_ids = stop_ids_of(path, raw, tok)
    meta = dict(raw.get("unmask") or {}) if isinstance(raw.get("unmask"), (dict, type(None))) else {}
    meta.update(revision=fingerprint(path), **cls.meta_of(path))
    return cls(model=model, tokenizer=tok, name=path.name, model_type=raw["model_type"],
                        mask_token_id=mask_id, logit_shift=fam.logit_shift, attention=fam.attention,
                        block_size=raw.get(fam.block_key), stop_ids=stop_ids, attn_impl=attn_impl, device=dev,
                        dtype=dtype, prompt_template="Q : {} A :" if meta.get("task") in TASK_NAMES else None,
                        info=meta, path=path)
