"""The CLI contract other tools depend on: JSON keys, exit codes, one-line errors without tracebacks.

Most cases call ``engine.__main__.main`` in this process (a fresh interpreter costs 5-20 s of imports each); the
process itself (its exit status and stderr as another tool sees them) is checked by the subprocess tests below."""

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from engine.__main__ import main


@pytest.fixture
def cli(capsys):
    """``python -m engine ARGS`` run in process: its exit status (main's return or argparse's SystemExit) and
    what it wrote, read the way the subprocess's would be."""
    def run(*args):
        capsys.readouterr()
        try:
            code = main(list(args))
        except SystemExit as e:
            code = e.code
        out, err = capsys.readouterr()
        return SimpleNamespace(returncode=code, stdout=out, stderr=err)
    return run


def process(*args):
    return subprocess.run([sys.executable, "-m", "engine", *args], capture_output=True, text=True, timeout=300)


def test_generate_json(cli, sdar_dir, tmp_path):
    out = cli("generate", "--prompt", "Ann has 3 apples. She buys 5 more. How many apples does she have now?",
              "--model", str(sdar_dir), "--decoder", "threshold", "--tau", "0.8", "--block-size", "4",
              "--gen-length", "16", "--json", "--trace-out", str(tmp_path / "t.npz"))
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    for key in ("text", "token_ids", "nfe", "steps", "generated_tokens", "wall_s", "decoder", "params"):
        assert key in d
    assert d["decoder"] == "threshold" and d["params"]["tau"] == 0.8 and d["params"]["block_size"] == 4
    assert 1 <= len(d["token_ids"]) <= 16 and d["nfe"] >= 1
    assert (tmp_path / "t.npz").stat().st_size > 0


@pytest.mark.parametrize("args,needle", [
    (["generate", "--prompt", "x", "--decoder", "nope"], "unknown decoder"),
    (["generate", "--prompt", "x", "--tau", "2"], "tau"),
    (["generate", "--prompt", "x", "--block-size", "0"], "block_size"),
    (["generate", "--prompt", "   "], "empty"),
    (["generate", "--prompt", "x", "--model", "/no/such/dir"], "unknown model"),
    (["generate", "--prompt", "x", "--bogus"], "unrecognized"),
    (["bench", "--n", "2", "--decoder", "threshold:nope=1"], "unknown parameter"),
    (["bench", "--n", "2", "--task", "nope"], "not a task name"),
    (["bench", "--task", "gsm8k", "--n", "5000", "--decoder", "ar:gen_length=16"], "1319 test problems"),
])
def test_bad_arguments_fail_with_one_line(cli, args, needle, sdar_dir):
    if "--model" not in args:
        args = args + ["--model", str(sdar_dir)]
    out = cli(*args)
    assert out.returncode != 0
    assert needle in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args,needle", [(["--decoder", "nope"], "unknown decoder"), (["--bogus"], "unrecognized")])
def test_a_bad_argument_ends_the_process_with_exit_2_and_one_line(args, needle, sdar_dir):
    """The process as a caller sees it: a user error (main's return) and an argparse error (its SystemExit)."""
    out = process("generate", "--prompt", "x", "--model", str(sdar_dir), *args)
    assert out.returncode == 2 and out.stdout == ""
    assert needle in out.stderr and "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_a_bad_decoder_or_value_answers_before_torch_loads():
    """The catalogue (torch-free) checks a decoder and its values first: the line comes in a fraction of a second,
    not after the 4-5 CPU-s of importing torch and transformers."""
    code = ("import sys; from engine.__main__ import main; rc = main(['generate', '--prompt', 'x', *sys.argv[1:]]); "
            "print(rc, 'torch' in sys.modules)")
    for bad in (["--decoder", "nope"], ["--tau", "2"], ["--block-size", "0"]):
        out = subprocess.run([sys.executable, "-c", code, *bad], capture_output=True, text=True, timeout=120)
        assert out.stdout.split() == ["2", "False"], (bad, out.stdout, out.stderr[-500:])


def test_bench_json(cli, sdar_dir):
    out = cli("bench", "--model", str(sdar_dir), "--n", "2", "--decoder", "ar",
              "--decoder", "threshold:tau=0.9,block_size=8", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert [r["decoder"] for r in rows] == ["ar", "threshold"]
    for r in rows:
        assert {"accuracy", "nfe", "tpf", "tokens_per_s", "decoder", "params", "speedup"} <= set(r)
    assert rows[0]["speedup"] == 1.0 and rows[0]["tpf"] == pytest.approx(1.0)


def test_generate_s2d2_and_tspd_flags(cli, sdar_dir):
    out = cli("generate", "--prompt", "Ann has 3 apples.", "--model", str(sdar_dir), "--decoder", "s2d2",
              "--preset", "sdar-a", "--router", "always", "--acceptance", "greedy", "--gen-length", "8", "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["params"]["router"] == "always" and d["params"]["block_size"] == 4 and d["params"]["cache_ver"]
    assert d["verify_forwards"] >= 1 and d["nfe"] == d["nfe_by_kind"]["draft"] + d["nfe_by_kind"]["verify"]
    assert 0 <= d["accepted_tokens"] <= len(d["token_ids"])
    out = cli("generate", "--prompt", "Ann has 3 apples.", "--model", str(sdar_dir), "--decoder", "tspd",
              "--controller", "heuristic", "--no-ce", "--kappa", "2", "--h-max", "3", "--gen-length", "8", "--json")
    assert out.returncode == 0, out.stderr
    p = json.loads(out.stdout)["params"]
    assert (p["controller"], p["ce"], p["kappa"], p["h_max"]) == ("heuristic", False, 2.0, 3)
