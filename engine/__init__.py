"""Unmask engine: model adapters, masks, cache, decoders and traces for diffusion LMs.

Knows nothing of the UI. Words used throughout (defined once, here):

- **block**: B consecutive positions aligned to the absolute grid ``pos // B``; blocks are produced left to right.
- **step**: one denoising iteration inside a block; every step is one model **forward** (counted in NFE).
- **commit**: write a token into a masked position for good.
- **draft / verify / span / router**: see ``engine.decoders.s2d2``; **drafter / target / reveal step**: see
  ``engine.decoders.simsd``.
- **TPF**: generated tokens per forward = generated tokens / NFE.
"""

__version__ = "0.2.0"   # part of every trace-cache key: traces of 0.1 (no record contract) are not reused
