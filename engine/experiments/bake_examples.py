"""Pre-bake one example trace per decoder into assets/examples/ (shown the moment the app opens).

    python -m engine.experiments.bake_examples [--model tiny]
The prompt is the app's first held-out example; settings are each decoder's defaults in the app.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from engine.decoders import build_decoder
from engine.loop import Generation
from engine.model import load_model
from engine.tasks import get_task

OUT = Path(__file__).resolve().parent.parent / "assets" / "examples"
SETTINGS = {
    "threshold": dict(block_size=8, tau=0.9),
    "llada": dict(block_size=8, steps=8),
    "ar": dict(),
    "s2d2": dict(block_size=8, tau=0.9, router="score", cost=1.0),
    "tspd": dict(block_size=8, tau=0.9, controller="mlp"),
}


def first_example() -> str:
    p = get_task("arith").problems("test", 1, seed=0)[0]
    body = p.prompt.removeprefix("Q : ").removesuffix(" A :")
    return body.replace(" .", ".").replace(" ?", "?")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    adapter = load_model(args.model)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    prompt = first_example()
    for name, params in SETTINGS.items():
        tr = Generation(adapter, prompt, build_decoder(name, gen_length=64, **params)).run()
        tr.save(out / f"{name}.npz")
        print(f"{name}: {tr.meta['text']!r} NFE {tr.nfe}")


if __name__ == "__main__":
    main()
