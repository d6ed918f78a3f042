"""Record a generate loop that is not Unmask's own (LLaDA's ``generate.py``, Fast-dLLM's cached loops, a ReMDM
sampler, a lab's fork) into an Unmask trace, by forward hooks on its model (``Recorder``); ``python -m engine
record`` does it without editing the script (``engine.record.auto``). docs/record.md tells how."""

from engine.record.calls import RecordError
from engine.record.recorder import DECODER, Recorder

__all__ = ["DECODER", "RecordError", "Recorder"]
