"""Unmask engine: model adapters, masks, cache, decoders and traces for diffusion LMs.

Knows nothing of the UI. Words used throughout (defined once, here):

- **block**: B consecutive positions aligned to the absolute grid ``pos // B``; blocks are produced left to right.
- **step**: one denoising iteration inside a block; every step is one model **forward** (counted in NFE).
- **commit**: write a token into a masked position for good.
- **draft / verify / span / router**: see ``engine.s2d2``.
- **TPF**: generated tokens per forward = generated tokens / NFE.
"""

__version__ = "0.1.0"
