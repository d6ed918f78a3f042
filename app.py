"""Unmask: an interactive explorer for fast decoding of diffusion language models.

    python app.py            # http://localhost:7860, the embedded model
Honours GRADIO_SERVER_NAME / GRADIO_SERVER_PORT; UNMASK_MODEL picks another model (a local directory or cached
hub id); UNMASK_CACHE_DIR moves the trace cache (default ~/.cache/unmask).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from engine.service import DecodeService
from engine.tasks import get_task
from engine.trace import Trace
from explorer.layout import build_demo, launch_kwargs
from explorer.store import TraceStore

EXAMPLES_DIR = Path(__file__).resolve().parent / "assets" / "examples"

try:  # on Hugging Face ZeroGPU Spaces the decode runs inside a GPU lease; elsewhere this is a no-op
    import spaces
    gpu = spaces.GPU
except ImportError:
    def gpu(fn):
        return fn


def examples(n: int = 8) -> list[tuple[str, int]]:
    """Held-out problems as natural text ("Q : ... A :" is added back by the model's prompt template)."""
    out = []
    for p in get_task("arith").problems("test", n, seed=0):
        body = p.prompt.removeprefix("Q : ").removesuffix(" A :")
        for mark in (" .", " ?"):
            body = body.replace(mark, mark[1:])
        out.append((body, p.answer))
    return out


def example_traces() -> dict[str, Trace]:
    return {p.stem: Trace.load(p) for p in sorted(EXAMPLES_DIR.glob("*.npz"))}


class GPUService(DecodeService):
    stream = gpu(DecodeService.stream)


def create_app():
    service = GPUService(default_model=os.environ.get("UNMASK_MODEL", "tiny"))
    service.model()  # load at start-up: the first visitor should not wait for it
    cache_dir = Path(os.environ.get("UNMASK_CACHE_DIR", Path.home() / ".cache" / "unmask"))
    store = TraceStore(str(cache_dir / "traces"))
    export_dir = Path(tempfile.mkdtemp(prefix="unmask-export-"))
    return build_demo(service, examples(), store=store, example_traces=example_traces(), export_dir=export_dir)


if __name__ == "__main__":
    demo = create_app()
    demo.queue(default_concurrency_limit=4).launch(
        server_name=os.environ.get("GRADIO_SERVER_NAME", "0.0.0.0"),
        server_port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")),
        allowed_paths=[tempfile.gettempdir()], **launch_kwargs())
