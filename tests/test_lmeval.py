"""Unmask as an lm-eval model (``engine.harness.lmeval``): a local YAML task over a local JSONL file runs through
lm_eval's own command line on a tiny random LLaDA checkpoint; the logged samples carry each decode's numbers and trace.
Skipped where the eval extra (requirements-eval.txt) is not installed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("lm_eval")

TASK = """task: unmask_tiny
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_target: "{{{{answer}}}}"
generation_kwargs:
  until: ["Question:"]
  max_gen_toks: 12
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
"""


def write_task(folder: Path, n: int = 3) -> Path:
    folder.mkdir(parents=True)
    rows = [dict(question=f"What is {i} plus {i}?", answer=str(2 * i)) for i in range(n)]
    (folder / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "unmask_tiny.yaml").write_text(TASK.format(data=folder / "data.jsonl"))
    return folder


def test_lm_eval_runs_a_local_task_through_unmask_and_logs_nfe_per_sample(tmp_path):
    from tests.families import write_llada
    model, _ = write_llada(tmp_path / "llada")
    tasks, out, traces = write_task(tmp_path / "tasks"), tmp_path / "out", tmp_path / "traces"
    args = [sys.executable, "-m", "engine.harness.lmeval", "--model", "unmask", "--model_args",
            f"pretrained={model},decoder=threshold:tau=0.9,block_size=4,trace_dir={traces}", "--batch_size", "2",
            "--tasks", "unmask_tiny", "--include_path", str(tasks), "--log_samples", "--output_path", str(out)]
    # lm_eval splits --model_args at commas: block_size=4 arrives as an argument of its own and joins the SPEC
    run = subprocess.run(args, capture_output=True, text=True, timeout=600,
                         env={**__import__("os").environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"})
    assert run.returncode == 0, run.stderr[-3000:]
    results = next(out.rglob("results_*.json"))
    assert "exact_match,none" in json.loads(results.read_text())["results"]["unmask_tiny"]
    samples = [json.loads(line) for line in next(out.rglob("samples_unmask_tiny_*.jsonl")).read_text().splitlines()]
    assert len(samples) == 3
    for s in samples:
        stats = s["arguments"]["gen_args_0"]["arg_1"]["unmask"]       # the request's generation arguments
        assert stats["nfe"] >= 1 and stats["tokens"] >= 1 and stats["decoder"] == "threshold"
        assert Path(stats["trace"]).is_file()


def test_log_likelihood_requests_are_refused_with_the_reason(tmp_path):
    from engine.harness.lmeval import UnmaskLM
    from tests.families import write_llada
    model, _ = write_llada(tmp_path / "llada")
    lm = UnmaskLM(pretrained=str(model), decoder="threshold:tau=0.9,block_size=4")
    with pytest.raises(NotImplementedError, match="Monte-Carlo"):
        lm.loglikelihood([])
    rendered = lm.apply_chat_template([{"role": "user", "content": "What is 2 plus 2?"}])   # --apply_chat_template
    assert "What is 2 plus 2?" in rendered and rendered != "What is 2 plus 2?"


def test_a_bad_spec_fails_before_any_request(tmp_path):
    from engine.errors import ConfigError
    from engine.harness.lmeval import UnmaskLM
    from tests.families import write_llada
    model, _ = write_llada(tmp_path / "llada")
    with pytest.raises(ConfigError):
        UnmaskLM(pretrained=str(model), decoder="threshold:tau=7")


class _Req:
    def __init__(self, context: str, gen_kwargs: dict):
        self.args, self.task_name, self.doc_id = (context, gen_kwargs), "t", 0


@pytest.fixture(scope="module")
def unmask_lm():
    from engine.harness.lmeval import UnmaskLM
    return UnmaskLM(pretrained="unmask-arith-tiny", decoder="threshold:tau=0.9,block_size=4", batch_size=2)


def test_a_string_until_is_one_stop_string_and_the_output_is_cut_to_max_gen_toks(unmask_lm):
    from engine.harness.lmeval import stops
    assert stops({"until": "Question:"}) == ["Question:"] and stops({"until": ["a", "", 3]}) == ["a"]
    prompt = "Q : Ann has 3 apples . She buys 5 more . How many apples does she have now ? A :"
    full = unmask_lm.generate_until([_Req(prompt, {"max_gen_toks": 24, "until": []})])[0]
    assert len(unmask_lm.adapter.tokenizer(full, add_special_tokens=False).input_ids) > 5
    cut = unmask_lm.generate_until([_Req(prompt, {"max_gen_toks": 5, "until": []})])[0]
    assert len(unmask_lm.adapter.tokenizer(cut, add_special_tokens=False).input_ids) <= 5    # 8 decoded, 5 kept
    word = full.split()[2]
    stopped = unmask_lm.generate_until([_Req(prompt, {"max_gen_toks": 24, "until": word})])[0]
    assert stopped == full[:full.index(word)]                  # cut at the word, not at its first letter


def test_sampling_arguments_are_honoured_or_refused(unmask_lm):
    from engine.errors import ConfigError
    from engine.harness.lmeval import request_sampling
    assert request_sampling({"do_sample": False, "temperature": 0.0}, {}) == {"temperature": "0"}
    assert request_sampling({"temperature": 0.7, "top_p": 0.9}, {}) == {"temperature": "0.7", "top_p": "0.9"}
    policy = unmask_lm.policy_for({"temperature": 0.7, "max_gen_toks": 10})
    assert policy.cfg.temperature == 0.7 and policy.cfg.gen_length == 12
    with pytest.raises(ConfigError, match="repetition_penalty"):
        unmask_lm.policy_for({"repetition_penalty": 1.1})


@pytest.mark.parametrize("args,needle", [("pretrained=/nonexistent/model", "unknown model"),
                                         ("decoder=threshold", "needs pretrained")])
def test_a_bad_model_argument_is_one_line_and_exit_2(args, needle):
    out = subprocess.run([sys.executable, "-m", "engine.harness.lmeval", "--model", "unmask", "--model_args", args,
                          "--tasks", "gsm8k", "--limit", "1"], capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).resolve().parent.parent)
    assert out.returncode == 2 and needle in out.stderr and "Traceback" not in out.stderr, out.stderr[-500:]
