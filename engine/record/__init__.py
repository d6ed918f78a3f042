"""Record a generate loop that is not Unmask's own (LLaDA's ``generate.py``, Fast-dLLM's cached loops, a ReMDM
sampler, a lab's fork) into an Unmask trace, by forward hooks on its model (``Recorder``); ``python -m engine
record`` does it without editing the script (``engine.record.auto``). docs/record.md tells how.

The names load on first use, so the command line (``engine.record.cli``) starts without torch."""

__all__ = ["DECODER", "RecordError", "Recorder"]


def __getattr__(name: str):
    if name == "RecordError":
        from engine.record.calls import RecordError
        return RecordError
    if name in ("Recorder", "DECODER"):
        from engine.record import recorder
        return getattr(recorder, name)
    raise AttributeError(name)
