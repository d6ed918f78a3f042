"""Unmask: an interactive explorer for fast decoding of diffusion language models.

    python app.py            # http://localhost:7860, the embedded models
Honours GRADIO_SERVER_NAME / GRADIO_SERVER_PORT; UNMASK_MODELS adds models a visitor may pick (comma-separated
local directories or cached hub ids, chosen by the operator); UNMASK_MAX_SECONDS bounds each request's engine time
(default 60); UNMASK_QUEUE caps waiting requests (default 32); UNMASK_CACHE_DIR moves the trace cache
(default ~/.cache/unmask).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from engine.model import DEFAULT_MODEL, embedded_models
from engine.service import DecodeService
from engine.tasks import TASKS, get_task
from engine.trace import Trace
from explorer.layout import build_demo, launch_kwargs
from explorer.page.context import Page
from explorer.store import TraceStore

EXAMPLES_DIR = Path(__file__).resolve().parent / "assets" / "examples"

try:  # on Hugging Face ZeroGPU Spaces the decode runs inside a GPU lease; elsewhere this is a no-op
    import spaces
    gpu = spaces.GPU
except ImportError:
    def gpu(fn):
        return fn


def shown(prompt: str) -> str:
    """A task prompt as a person would type it ("Q : ... A :" is added back by the model's prompt template)."""
    body = prompt.removeprefix("Q : ").removesuffix(" A :")
    for mark in (" .", " ?", " ,"):
        body = body.replace(mark, mark[1:])
    return body


def examples_for(task_name: str, n: int = 10) -> list:
    """Held-out problems of the model's task (a mix: a few of each task)."""
    task = get_task(task_name)
    parts = [get_task(t) for t in task.weights] if hasattr(task, "weights") else [task]
    per = max(1, n // len(parts))
    return [(shown(p.prompt), p) for t in parts for p in t.problems("test", per, seed=0)]


def example_traces() -> dict[str, Trace]:
    return {p.stem: Trace.load(p) for p in sorted(EXAMPLES_DIR.glob("*.npz"))}


class GPUService(DecodeService):
    stream = gpu(DecodeService.stream)


def create_app():
    extra = [m.strip() for m in os.environ.get("UNMASK_MODELS", "").split(",") if m.strip()]
    models = tuple(dict.fromkeys([DEFAULT_MODEL, *embedded_models(), *extra]))
    service = GPUService(default_model=models[0])
    examples = {}
    for name in models:
        task = service.model(name).info.get("task")  # load at start-up: the first visitor should not wait
        examples[name] = examples_for(task) if task in TASKS else []
    cache_dir = Path(os.environ.get("UNMASK_CACHE_DIR", Path.home() / ".cache" / "unmask"))
    store = TraceStore(str(cache_dir / "traces"))
    export_dir = Path(tempfile.mkdtemp(prefix="unmask-export-"))
    page = Page(service, examples, store=store, example_traces=example_traces(), export_dir=export_dir,
                models=models)
    return build_demo(page)


if __name__ == "__main__":
    demo = create_app()
    # no allowed_paths: gradio serves only the files a handler returned (copied into its own cache)
    demo.queue(default_concurrency_limit=4, max_size=int(os.environ.get("UNMASK_QUEUE", "32"))).launch(
        server_name=os.environ.get("GRADIO_SERVER_NAME", "0.0.0.0"),
        server_port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")), **launch_kwargs())
