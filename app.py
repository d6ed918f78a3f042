"""Unmask: an interactive explorer for fast decoding of diffusion language models.

    python app.py            # http://localhost:7860, the embedded model
Honours GRADIO_SERVER_NAME / GRADIO_SERVER_PORT; UNMASK_MODEL picks another model (a local directory or cached id).
"""

from __future__ import annotations

import os

from engine.service import DecodeService
from engine.tasks import get_task
from explorer.layout import build_demo, launch_kwargs


def examples(n: int = 8) -> list[tuple[str, int]]:
    """Held-out problems as natural text ("Q : ... A :" is added back by the model's prompt template)."""
    out = []
    for p in get_task("arith").problems("test", n, seed=0):
        body = p.prompt.removeprefix("Q : ").removesuffix(" A :")
        for mark in (" .", " ?"):
            body = body.replace(mark, mark[1:])
        out.append((body, p.answer))
    return out


def create_app():
    service = DecodeService(default_model=os.environ.get("UNMASK_MODEL", "tiny"))
    service.model()  # load at start-up: the first visitor should not wait for it
    return build_demo(service, examples())


if __name__ == "__main__":
    demo = create_app()
    demo.queue(default_concurrency_limit=4).launch(
        server_name=os.environ.get("GRADIO_SERVER_NAME", "0.0.0.0"),
        server_port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")), **launch_kwargs())
