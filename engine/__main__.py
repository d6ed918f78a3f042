"""Command line: ``python -m engine generate|bench|train``. A stable contract: other tools parse ``--json``."""

from __future__ import annotations

import argparse
import json
import sys

from engine.loop import ConfigError
from engine.model import ModelLoadError


class OneLineParser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump: scripts read stderr
        print(f"error: {message}", file=sys.stderr)
        sys.exit(2)


def _cmd_generate(args) -> None:
    from engine.decoders import build_decoder
    from engine.loop import Generation
    from engine.model import load_model

    if not args.prompt.strip():
        raise ConfigError("the prompt is empty")
    if len(args.prompt) > 4000:
        raise ConfigError(f"the prompt is {len(args.prompt)} characters; at most 4000")
    params = dict(block_size=args.block_size, steps=args.steps, tau=args.tau, gen_length=args.gen_length,
                  temperature=args.temperature, seed=args.seed, use_cache=not args.no_cache)
    if args.decoder == "ar":
        params.pop("block_size"), params.pop("steps"), params.pop("tau")
    elif args.decoder == "llada":
        params.pop("tau")
    elif args.decoder == "threshold":
        params.pop("steps") if args.steps is None else None
    policy = build_decoder(args.decoder, **{k: v for k, v in params.items() if v is not None})
    adapter = load_model(args.model, device=args.device)
    tr = Generation(adapter, args.prompt, policy).run()
    if args.trace_out:
        tr.save(args.trace_out)
    m = tr.meta
    out = dict(text=m["text"], token_ids=m["token_ids"], nfe=m["nfe"], steps=len(tr.records),
               generated_tokens=m["generated_tokens"], wall_s=round(m["wall_s"], 4), decoder=m["decoder"],
               params=m["params"], tpf=round(tr.tpf, 4), nfe_by_kind=m["nfe_by_kind"], model=m["model"])
    if args.json:
        print(json.dumps(out))
    else:
        print(m["text"])
        print(f"-- {m['decoder']}: {m['generated_tokens']} tokens, NFE {m['nfe']}, TPF {tr.tpf:.2f}, "
              f"{m['wall_s']:.3f}s", file=sys.stderr)


def _cmd_bench(args) -> None:
    from engine.bench import format_table, run_bench
    from engine.model import load_model

    if not 1 <= args.n <= 100000:
        raise ConfigError("--n must be in 1..100000")
    adapter = load_model(args.model, device=args.device)
    prog = None if args.json else (lambda i, n: print(f"\r{i}/{n}", end="", file=sys.stderr, flush=True))
    rows = run_bench(adapter, args.task, args.n, args.decoder or ["ar"], seed=args.seed, progress=prog)
    if args.json:
        print(json.dumps(rows))
    else:
        print(file=sys.stderr)
        print(format_table(rows))


def main(argv=None) -> int:
    ap = OneLineParser(prog="python -m engine", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=OneLineParser)
    g = sub.add_parser("generate", help="decode one prompt")
    g.add_argument("--prompt", required=True)
    g.add_argument("--model", default="tiny", help="'tiny' (embedded), a local directory, or a cached hub id")
    g.add_argument("--decoder", default="threshold")
    g.add_argument("--block-size", type=int)
    g.add_argument("--steps", type=int)
    g.add_argument("--tau", type=float)
    g.add_argument("--gen-length", type=int, default=64)
    g.add_argument("--temperature", type=float, default=0.0)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--no-cache", action="store_true", help="recompute the prefix every forward (exactness check)")
    g.add_argument("--json", action="store_true")
    g.add_argument("--trace-out", help="save the step trace (.npz)")
    g.add_argument("--device")
    b = sub.add_parser("bench", help="accuracy / NFE / TPF / tokens/s of decoders on held-out problems")
    b.add_argument("--model", default="tiny")
    b.add_argument("--task", default="arith")
    b.add_argument("--n", type=int, default=100)
    b.add_argument("--decoder", action="append", help="SPEC: name or name:key=value,... (repeatable)")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--json", action="store_true")
    b.add_argument("--device")
    sub.add_parser("train", help="train the embedded model (see python -m engine.train --help)", add_help=False)
    args, rest = ap.parse_known_args(argv)
    if args.cmd == "train":
        from engine.train import main as train_main
        train_main(rest)
        return 0
    if rest:
        ap.error(f"unrecognized arguments: {' '.join(rest)}")
    try:
        {"generate": _cmd_generate, "bench": _cmd_bench}[args.cmd](args)
    except (ConfigError, ModelLoadError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
