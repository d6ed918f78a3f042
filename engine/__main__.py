"""Command line: ``python -m engine generate|bench|tasks|train``. A stable contract: other tools parse ``--json``.

Decoder flags are made from the parameter catalogue (``engine.catalogue.catalogue``): every parameter is
``--name-with-dashes``
(booleans ``--X / --no-X``), and ``bench`` takes the same keys in SPEC strings.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from engine.catalogue import catalogue
from engine.errors import ConfigError, UserError
from engine.record import cli as record
from engine.runtime.lifecycle import stop_all

# a decoder's own parameters are the group named after it: the CLI titles it as the catalogue does
GROUPS = {"main": "decoding", "common": "decoding", "sampling": "sampling", "engine": "engine",
          **{d.name: f"{d.name} ({d.title})" for d in catalogue.DECODERS.values()}}


class OneLineParser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump: scripts read stderr
        print(f"error: {message}", file=sys.stderr)
        sys.exit(2)


def add_decoder_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per catalogue parameter, grouped as on the page; absent flags stay None (= the default)."""
    groups = {}
    for name, p in catalogue.PARAMS.items():
        title = GROUPS[p.group]
        g = groups.get(title) or groups.setdefault(title, parser.add_argument_group(title))
        flag = "--" + (p.cli or name.replace("_", "-"))
        choices = f" ({' | '.join(c for c in p.choices if c)})" if p.choices else ""
        rng = f" [{p.interval()}]" if p.lo is not None and p.type is not bool else ""
        helptext = f"{p.help}{choices}{rng}; default {p.default!r}"
        if p.type is bool:
            g.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction, default=None, help=helptext)
        else:
            g.add_argument(flag, dest=name, default=None, help=helptext, metavar=p.type.__name__.upper())


def decoder_values(args) -> dict:
    return {k: v for k, v in vars(args).items() if k in catalogue.PARAMS and v is not None}


def _cmd_generate(args) -> None:
    catalogue.validate(args.decoder, decoder_values(args))    # a bad decoder or value: one line before torch loads
    from engine.decoders import build_decoder
    from engine.runtime.loop import Generation
    from engine.models.model import load_model
    from engine.harness.service import check_prompt
    from engine.tasks import get_task

    prompt = check_prompt(args.prompt)
    policy = build_decoder(args.decoder, **decoder_values(args))
    adapter = load_model(args.model or get_task(args.task).model, device=args.device,
                         allow_download=args.allow_download or None)
    tr = Generation(adapter, prompt, policy).run()
    if args.branch:                            # the run again from its state after a step (engine.runtime.branch)
        from engine.harness.service import branch_generation
        tr = branch_generation(adapter, tr, args.branch).run()
    if args.trace_out:
        tr.save(args.trace_out)
    m = tr.meta
    out = dict(text=m.text, token_ids=m.token_ids, prompt_ids=m.prompt_ids, nfe=m.nfe,
               steps=len(tr.records), generated_tokens=m.generated_tokens, wall_s=round(m.wall_s, 4),
               decoder=m.decoder, params=m.params, tpf=round(tr.tpf, 4), nfe_by_kind=m.nfe_by_kind,
               model=m.model)
    out.update({k: v for k, v in m.summary.items() if isinstance(v, (int, float, str, bool))})  # the decoder's own
    if m.branch is not None:
        out["branch"] = m.branch
    if args.json:
        print(json.dumps(out))
    else:
        print(m.text)
        print(f"-- {m.decoder}: {m.generated_tokens} tokens, NFE {m.nfe}, TPF {tr.tpf:.2f}, "
              f"{m.wall_s:.3f}s", file=sys.stderr)


def _cmd_bench(args) -> None:
    from engine.harness.bench import format_table, run_bench
    from engine.models.model import load_model
    from engine.tasks import get_task, load_task_file, with_task_length

    if not 1 <= args.n <= 100000:
        raise ConfigError("--n must be in 1..100000")
    if not 1 <= args.batch <= 256:
        raise ConfigError("--batch must be in 1..256")
    from engine.runtime.jobs import configure
    configure(max_running=args.batch)          # the engine loop's running set is the bench's batch
    task = load_task_file(args.task, allow_code=args.allow_code_execution, data=args.data, zero_shot=args.zero_shot)
    for note in getattr(get_task(task), "notes", lambda: [])():    # metrics that need what is not here
        print(f"note: {note}; it and score are left out of the rows", file=sys.stderr)
    if getattr(get_task(task), "grader", None) == "code" and not args.allow_code_execution:
        raise ConfigError(f"{task} is graded by running the completions' tests: add --allow-code-execution "
                          "(sandboxed: engine/tasks/sandbox.py), or no accuracy can be given")
    if getattr(get_task(task), "grader", None) == "code":
        from engine.tasks.sandbox import available
        if available():
            raise ConfigError(available())
    model = args.model or get_task(task).model
    if model is None:
        raise ConfigError(f"--model is needed for {task}: no embedded model knows it (a local checkpoint's path)")
    adapter = load_model(model, device=args.device, allow_download=args.allow_download or None)
    from engine.harness.progress import progress
    prog = None if args.json else progress(f"bench {task}")
    specs = [with_task_length(s, get_task(task)) for s in args.decoder or [catalogue.BASELINE_DECODER]]
    keep = trace_keeper(args.traces, get_task(task), specs) if args.traces else None
    rows = run_bench(adapter, task, args.n, specs, seed=args.seed, progress=prog, batch=args.batch, on_trace=keep)
    if args.json:
        print(json.dumps(rows))
    else:
        print(format_table(rows))


def trace_keeper(folder: str, task, specs: list[str]):
    """``on_trace`` for ``bench --traces``: each decode's trace saved, and a line of problems.jsonl per setting
    and problem (spec, index, id, verdict, correct, text, trace): from a number back to the runs."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    log = (out / "problems.jsonl").open("w", encoding="utf-8")

    def keep(spec, i, prob, trace):
        path = out / f"{specs.index(spec)}-{i}.npz"
        trace.save(path)
        verdict = task.verdict(trace.meta.text, prob)
        ident = prob.answer.get("id") if isinstance(prob.answer, dict) else None     # a data task's row id
        log.write(json.dumps(dict(spec=spec, index=i, id=ident, verdict=verdict, correct=task.check(
            trace.meta.text, prob), text=trace.meta.text, trace=str(path))) + "\n")
        log.flush()
    return keep


def _cmd_tasks(args) -> None:
    from engine.tasks import TASKS, get_task
    from engine.tasks.data import shipped
    rows = []
    for name, cls in TASKS.items():
        t = cls()
        p = t.problems("test", 1, seed=0)[0]
        rows.append(dict(name=name, description=t.description, model=t.model, example_prompt=p.prompt,
                         example_answer=p.solution))
    for name in shipped():                     # the data tasks: a checkpoint of one's own (--model)
        t = get_task(name)
        p = t.problems("test", 1)[0]
        rows.append(dict(name=name, description=t.description, model="--model", example_prompt=p.prompt[:300],
                         example_answer=p.solution[:120]))
    if args.json:
        print(json.dumps(rows))
    else:
        for r in rows:
            print(f"{r['name']:7s} [{r['model']}] {r['description']}\n        {r['example_prompt']} "
                  f"{r['example_answer']}")


def _cmd_record(args, rest) -> int:
    args.command = args.command + rest
    try:
        return record.run(args)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def build_parser() -> OneLineParser:
    ap = OneLineParser(prog="python -m engine", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=OneLineParser)
    g = sub.add_parser("generate", help="decode one prompt")
    g.add_argument("--prompt", required=True)
    g.add_argument("--model", help="an embedded model name ('tiny'), a local directory, or a cached hub id "
                                   "(default: the model that knows --task)")
    g.add_argument("--task", default="arith", help="picks the default model and prompt format")
    g.add_argument("--decoder", default=catalogue.DEFAULT_DECODER, help=" | ".join(catalogue.DECODERS))
    add_decoder_flags(g)
    g.add_argument("--json", action="store_true")
    g.add_argument("--trace-out", help="save the step trace (.npz)")
    g.add_argument("--branch", help='JSON: {"step": s, "force": [position, token id], "spec": SPEC}: decode, then '
                   "branch the run after step s (a forced token, another decoder); prints the branch")
    g.add_argument("--device", help="cuda | mps | cpu (default: the best available)")
    g.add_argument("--allow-download", action="store_true", help="let a hub id download (else: local cache only)")
    b = sub.add_parser("bench", help="accuracy / NFE / TPF / tokens/s of decoders on held-out problems")
    b.add_argument("--model", help="default: the model that knows --task")
    b.add_argument("--task", default="arith", help="a synthetic task (arith, story, picks, mix), a shipped data "
                   "task (gsm8k, math500, humaneval) or a folder with card.json and data.jsonl[.gz]")
    b.add_argument("--data", help="with --task parallelbench:GROUP/NAME: your local copy of the benchmark's "
                   "data/output/test folder (or one task's .jsonl, task_config.yaml beside it), graded by its metrics")
    b.add_argument("--zero-shot", action="store_true", help="with --data: the question alone, without the rows' "
                   "worked examples (the benchmark sends them as earlier chat turns)")
    b.add_argument("--allow-code-execution", action="store_true", help="run code tasks' tests on the completions "
                   "(sandboxed: engine/tasks/sandbox.py); without it code answers stay ungraded")
    b.add_argument("--n", type=int, default=100)
    b.add_argument("--decoder", action="append", help="SPEC: name or name:key=value,... (repeatable)")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--batch", type=int, default=1, help="decodes per round of the engine loop (its max_running): their forwards run as "
                   "one batched forward (uniform's canvas forwards run one by one); the rows equal --batch 1's")
    b.add_argument("--json", action="store_true")
    b.add_argument("--traces", help="a folder: every decode's trace (.npz) and problems.jsonl, one line per setting "
                   "and problem with its verdict, its text and its trace's path (open a trace with "
                   "engine.records.trace.Trace.load, or explorer.export)")
    b.add_argument("--device", help="cuda | mps | cpu (default: the best available)")
    b.add_argument("--allow-download", action="store_true", help="let a hub id download (else: local cache only)")
    t = sub.add_parser("tasks", help="the task families, their example problems and models")
    t.add_argument("--json", action="store_true")
    sub.add_parser("train", help="train an embedded model (see python -m tools.training.train --help)",
                   add_help=False)
    record.add_parser(sub)
    return ap


def main(argv=None) -> int:
    ap = build_parser()
    args, rest = ap.parse_known_args(argv)
    if args.cmd == "train":        # tooling's own entry point, in its own process: the engine imports no tooling
        import subprocess
        return subprocess.run([sys.executable, "-m", "tools.training.train", *rest]).returncode
    if args.cmd == "record":       # the script runs in its own process, the recorder's hook installed there
        return _cmd_record(args, rest)
    if rest:
        ap.error(f"unrecognized arguments: {' '.join(rest)}")
    try:
        {"generate": _cmd_generate, "bench": _cmd_bench, "tasks": _cmd_tasks}[args.cmd](args)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:        # the engine thread ended, the output written, before the interpreter exits (a thread still
        stop_all()  # inside torch then aborts the process, and stdout's buffer is lost: engine.runtime.lifecycle)
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
