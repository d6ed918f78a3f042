"""DiffusionGemma's runner (``engine.runtime.runner`` has the interface and the other model kinds)."""

from __future__ import annotations

import torch

from engine.runtime.runner import Runner
from engine.runtime.scheduler import Call


class CanvasRunner(Runner):
    """DiffusionGemma's encoder/decoder. Its forwards are requests of their own (``Call``: the masks come from the
    model's own builders, one canvas at a time): ``encode`` adds the tokens before a canvas to the encoder's
    cache, ``denoise`` runs the decoder over a canvas against it."""
    cache_name = "encoder KV cache (exact)"

    def __init__(self, adapter, prompt_ids: list[int], cfg, **flags):
        super().__init__(adapter, prompt_ids, cfg, **flags)
        self.cache = adapter.new_cache()     # the encoder's K/V of positions [0, encoded)
        self.encoded = 0

    def encode(self, lo: int):
        """One encoder forward over the positions not yet in the cache, up to ``lo`` (the prompt, then each
        finished canvas)."""
        self.cache = yield Call(self.adapter.encode, (self.tokens[self.encoded:lo], self.encoded, self.cache))
        self.encoded = lo
        self.nfe["encode"] += 1

    def denoise(self, canvas: torch.Tensor, lo: int, conditioning: torch.Tensor | None):
        """One decoder forward over a canvas (C,) at ``lo``, self-conditioned on the previous step's tempered
        logits (C, V) or None -> logits (C, V) float32."""
        logits = yield Call(self.adapter.denoise, (canvas, lo, self.cache, conditioning))
        self.nfe["draft"] += 1
        return logits

    def _unfinished(self, gen: list[int], records) -> list[int]:
        """Any id may be generated on a canvas (there is no [MASK]): the canvases made."""
        return gen[:max((int(rec.positions.max()) + 1 - self.P for rec in records), default=0)]

    def nfe_paper(self, records) -> int:
        return self.total_nfe - self.nfe["encode"]   # DiffusionGemma's tokens_per_forward: decoder forwards
