"""``python -m engine record --out run.npz -- python my_generate.py ARGS``: the script runs as it would, in its own
process, with the recorder's hook installed there (``engine.record.auto``); its trace is saved to ``--out``.
Torch-free here: the command only starts the script and reads its one-line status."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from engine.errors import UserError

BOOT = Path(__file__).resolve().parent / "boot"
ROOT = Path(__file__).resolve().parents[2]


def add_parser(sub) -> None:
    r = sub.add_parser("record", help="run a generate script and record its decode into a trace (docs/record.md)")
    r.add_argument("--out", required=True, help="the trace to write (.npz; open it with python app.py --trace)")
    r.add_argument("--mask-id", type=int, help="the [MASK] token id (default: the model's config.mask_token_id)")
    r.add_argument("--prompt-len", type=int, help="P (default: where the first call's first [MASK] stands)")
    r.add_argument("--row", type=int, default=0, help="the batch row to record (of the conditional half under "
                   "classifier-free guidance)")
    r.add_argument("--block-size", type=int, help="the loop's block, for the records' block labels")
    r.add_argument("--logit-shift", type=int, default=0, choices=(0, 1),
                   help="1 where position i's logit is at row i - 1 (Dream)")
    r.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command that runs the script")


def loop_name(command: list[str]) -> str:
    """The script's name: its first ``.py`` argument, the module after ``-m``, else the program."""
    for i, a in enumerate(command):
        if a.endswith(".py"):
            return Path(a).name
        if a == "-m" and i + 1 < len(command):
            return command[i + 1]
    return Path(command[0]).name


def run(args) -> int:
    """Run the command with the hook; print what was recorded (or why not) in one line. Returns the exit code:
    the script's own if it failed, 2 if nothing could be recorded."""
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise UserError("give the command to record after --, e.g. -- python my_generate.py")
    out = Path(args.out)
    if out.suffix != ".npz" or not out.parent.is_dir():
        raise UserError(f"--out must be a .npz file in an existing folder, not {str(out)[:80]!r}")
    with tempfile.TemporaryDirectory(prefix="unmask-record-") as tmp:
        status = Path(tmp) / "status.json"
        cfg = dict(out=str(out.resolve()), status=str(status), mask_id=args.mask_id, prompt_len=args.prompt_len,
                   row=args.row, block_size=args.block_size, logit_shift=args.logit_shift,
                   loop=loop_name(command), argv=command)
        env = dict(os.environ, UNMASK_RECORD=json.dumps(cfg),
                   PYTHONPATH=os.pathsep.join([str(BOOT), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
        rc = subprocess.run(command, env=env).returncode
        result = json.loads(status.read_text()) if status.is_file() else dict(
            error="the script did not reach its end with the hook installed (is it a Python script?)")
    if "error" in result:
        print(f"error: nothing recorded: {result['error']}", file=sys.stderr)
        return rc or 2
    note = "" if result["closed"] else " (its last forward's writes unknown: the script never decoded the result)"
    print(f"{out}: {result['nfe']} forwards, {result['tokens']} tokens recorded{note}; python app.py --trace {out}")
    return rc
