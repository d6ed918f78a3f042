"""Put first on PYTHONPATH by ``python -m engine record`` (never imported otherwise): the recorder's hook is
installed in the recorded script's process before its first line runs (``engine.record.auto``). Being first, this
module hides the ``sitecustomize`` the interpreter would have run (Debian's, a conda environment's), so it runs
that one too: the next on ``sys.path``, in this process and in the script's children, which inherit the path."""

import importlib.machinery
import importlib.util
import os
import sys

if os.environ.get("UNMASK_RECORD"):
    from engine.record.auto import install
    install()


def _run_the_hidden_one() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


_run_the_hidden_one()
