"""The runner of each model kind (``engine.runtime.runner``: block-causal and full attention; ``engine.runtime.canvas``:
a whole-canvas model's), chosen here so neither module imports the other's kind."""

from __future__ import annotations

from engine.runtime.canvas import CanvasRunner
from engine.runtime.runner import BlockCausalRunner, FullRunner, Runner


def make_runner(adapter, prompt_ids: list[int], cfg, **flags) -> Runner:
    """The runner of the adapter's model kind."""
    runners = {"block_causal": BlockCausalRunner, "full": FullRunner, "canvas": CanvasRunner}
    return runners[adapter.attention](adapter, prompt_ids, cfg, **flags)
