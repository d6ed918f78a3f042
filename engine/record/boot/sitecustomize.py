"""Put first on PYTHONPATH by ``python -m engine record`` (never imported otherwise): the recorder's hook is
installed in the recorded script's process before its first line runs (``engine.record.auto``)."""

import os

if os.environ.get("UNMASK_RECORD"):
    from engine.record.auto import install
    install()
