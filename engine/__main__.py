"""Command line: ``python -m engine generate|bench|train``. A stable contract: other tools parse ``--json``."""

from __future__ import annotations

import argparse
import json
import sys

from engine.loop import ConfigError
from engine.model import ModelLoadError


DECODER_FLAGS = ("block_size", "steps", "tau", "gen_length", "temperature", "top_k", "top_p", "seed", "rule",
                 "remasking", "preset", "router", "estimator", "beta", "cost", "score_type", "tau_span", "tau_score",
                 "tau_on", "tau_off", "acceptance", "draft_ver", "cache_ver", "controller", "ce", "kappa", "h_max",
                 "window", "tau_s")


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
    params = {k: v for k, v in vars(args).items() if k in DECODER_FLAGS and v is not None}
    if args.no_cache:
        params["use_cache"] = False
    if args.no_eos_stop:
        params["stop_at_eos"] = False
    policy = build_decoder(args.decoder, **params)
    adapter = load_model(args.model, device=args.device)
    tr = Generation(adapter, args.prompt, policy).run()
    if args.trace_out:
        tr.save(args.trace_out)
    m = tr.meta
    out = dict(text=m["text"], token_ids=m["token_ids"], nfe=m["nfe"], steps=len(tr.records),
               generated_tokens=m["generated_tokens"], wall_s=round(m["wall_s"], 4), decoder=m["decoder"],
               params=m["params"], tpf=round(tr.tpf, 4), nfe_by_kind=m["nfe_by_kind"], model=m["model"])
    if args.decoder == "s2d2":
        out.update(verify_forwards=m["verify_forwards"], accepted_tokens=m["accepted_tokens"])
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
    g.add_argument("--gen-length", type=int)
    g.add_argument("--temperature", type=float)
    g.add_argument("--top-k", type=int)
    g.add_argument("--top-p", type=float)
    g.add_argument("--seed", type=int)
    g.add_argument("--rule", help="threshold: fastdllm | sdar")
    g.add_argument("--remasking", help="llada: low_confidence | random")
    s2 = g.add_argument_group("s2d2")
    s2.add_argument("--preset", help="sdar-a | sdar-b | quality | speed")
    s2.add_argument("--router", help="always | never | span | score | hysteresis | ucb")
    s2.add_argument("--estimator", help="entropy | margin | hard_entropy | confidence | linear_margin | renyi2")
    s2.add_argument("--beta", type=float)
    s2.add_argument("--cost", type=float)
    s2.add_argument("--score-type", help="static | dynamic")
    s2.add_argument("--tau-span", type=int)
    s2.add_argument("--tau-score", type=float)
    s2.add_argument("--tau-on", type=float)
    s2.add_argument("--tau-off", type=float)
    s2.add_argument("--acceptance", help="stochastic | greedy")
    s2.add_argument("--draft-ver", action="store_const", const=True, help="partial-causal drafting mask")
    s2.add_argument("--cache-ver", action="store_const", const=True, help="AR-like (token-causal) committed K/V")
    g.add_argument("--no-cache", action="store_true", help="recompute the prefix every forward (exactness check)")
    g.add_argument("--no-eos-stop", action="store_true", help="decode all --gen-length tokens")
    g.add_argument("--json", action="store_true")
    g.add_argument("--trace-out", help="save the step trace (.npz)")
    g.add_argument("--device")
    tg = g.add_argument_group("tspd (TSPD + CE, our reconstruction)")
    tg.add_argument("--controller", help="mlp | heuristic")
    tg.add_argument("--ce", action=argparse.BooleanOptionalAction, default=None,
                    help="confidence extrapolation look-ahead (--no-ce to ablate)")
    tg.add_argument("--kappa", type=float, help="LCB width in forecast standard deviations")
    tg.add_argument("--h-max", type=int, help="longest look-ahead horizon")
    tg.add_argument("--window", type=int, help="trajectory window k")
    tg.add_argument("--tau-s", type=float, help="controller threshold (0 = calibrated)")
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
