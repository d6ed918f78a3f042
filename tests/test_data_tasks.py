"""Data tasks (GSM8K, MATH-500, HumanEval as shipped, and a folder of one's own): the gold answers pass their
graders, perturbed ones fail, code runs only sandboxed and only when asked, prompts are built as the card says,
and the command-line bench runs them end to end on a tiny random checkpoint."""

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from engine.errors import ConfigError
from engine.tasks import get_task, load_task_file
from engine.tasks.data import DataTask
from engine.tasks.graders import extract_number, grade_choice, grade_math, grade_number, last_boxed
from engine.tasks.sandbox import run_tests


def test_every_gsm8k_gold_solution_passes_strict_and_flexible():
    task = get_task("gsm8k")
    probs = task.problems("test", 1319)
    assert len({p.answer["id"] for p in probs}) == 1319
    assert all(grade_number(p.solution, p.solution, mode) for p in probs for mode in ("strict-match", "value"))
    assert all(task.verdict(p.solution, p) == "valid" for p in probs)


def test_every_math500_gold_solution_passes_on_its_boxed_answer():
    task = get_task("math500")
    probs = task.problems("test", 500)
    assert all(task.verdict(p.answer["solution"], p) == "valid" for p in probs)


def test_perturbed_answers_fail():
    gold = "She pays 3 * 24 = $72.\n#### 72"
    assert grade_number("so #### 72", gold) and grade_number("#### 72.00", gold, "value")
    assert not grade_number("#### 72.00", gold)                       # lm-eval's strict-match: exact text
    assert not grade_number("#### 73", gold)                          # a changed number
    assert not grade_number("The answer is 72.", gold)                # no ####: GSM8K's own rule says invalid
    assert grade_number("The answer is $72.", gold, "flexible-extract")   # lm-eval's flexible extract takes it
    assert not grade_number("#### 72\nCheck: 2 more", gold, "flexible-extract")   # its *last* number
    assert not grade_number("no number at all", gold, "flexible-extract")
    assert extract_number("#### 1,234") == 1234
    assert grade_math("so \\boxed{\\dfrac{1}{2}}.", "\\frac12") and grade_math("\\boxed{0.5}", "0.50")
    assert not grade_math("\\boxed{\\frac{1}{3}}", "\\frac{1}{2}")    # a wrong boxed expression
    assert not grade_math("one half", "\\frac{1}{2}")                  # nothing boxed
    assert last_boxed("a \\boxed{x^{2}} then \\boxed{\\sqrt{\\frac{1}{2}}}") == "\\sqrt{\\frac{1}{2}}"
    assert grade_choice("The answer is (C).", "C") and not grade_choice("B", "C")
    probs = get_task("math500").problems("test", 20)
    assert sum(get_task("math500").verdict(f"\\boxed{{{p.solution}+1}}", p) == "valid" for p in probs) == 0


def test_humaneval_canonical_solutions_pass_in_the_sandbox_and_only_when_asked():
    assert get_task("humaneval").verdict("    return 1\n", get_task("humaneval").problems("test", 1)[0]) == \
        "ungraded"                                                     # the shipped task never runs code
    task = get_task(load_task_file("humaneval", allow_code=True))
    probs = task.problems("test", 164)
    with ThreadPoolExecutor(4) as pool:                                 # each is its own process
        verdicts = list(pool.map(lambda p: task.verdict(p.solution, p), probs))
    assert verdicts.count("valid") == 164, [v for v in verdicts if v != "valid"][:3]
    load_task_file("humaneval")                                         # back to the shipped, never-run state


@pytest.mark.parametrize("body,reason,timeout", [
    ("    while True:\n        pass\n", "timed out", 2),       # a loop spends its whole timeout on a core
    ("    x = [bytearray(2 ** 28) for _ in range(8)]\n", "MemoryError", 8),
    ("    import socket\n    socket.create_connection(('1.1.1.1', 53), timeout=2)\n", "failed: ", 8),
])
def test_a_hostile_completion_fails_with_its_reason(body, reason, timeout):
    row = get_task("humaneval").problems("test", 1)[0].answer
    assert reason in run_tests(row, body, timeout=timeout)


def test_writing_outside_the_sandbox_fails_and_leaves_no_file(tmp_path):
    target = tmp_path / "escaped.txt"
    row = get_task("humaneval").problems("test", 1)[0].answer
    verdict = run_tests(row, f"    open({str(target)!r}, 'w').write('x')\n", timeout=4)
    assert verdict.startswith("failed") and not target.exists()       # tests/test_sandbox.py: every other way


def own_task(folder: Path, **card) -> Path:
    folder.mkdir()
    rows = [dict(id="a", prompt="What is 2 + 3?", answer="#### 5"), dict(id="b", prompt="What is 4 + 4?",
                                                                           answer="#### 8", split="val")]
    (folder / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "card.json").write_text(json.dumps(dict(name="mine", grader="number", **card)))
    return folder


def test_n_shot_prompts_and_stop_strings_follow_the_card(tmp_path):
    task = DataTask(own_task(tmp_path / "t", shots=1, template="Question: {prompt}\nAnswer:", stop=["Question:"],
                             few_shot=[dict(prompt="What is 1 + 1?", answer="1 + 1 = 2.\n#### 2")]))
    (p,) = task.problems("test", 1)
    assert p.prompt == "Question: What is 1 + 1?\nAnswer: 1 + 1 = 2.\n#### 2\n\nQuestion: What is 2 + 3?\nAnswer:"
    assert task.verdict(" 5.\n#### 5\n\nQuestion: What is 9 + 9?\n#### 18", p) == "valid"   # cut at the stop
    assert [q.answer["id"] for q in task.problems("val", 1)] == ["b"]
    with pytest.raises(ConfigError, match="has 1 test problems"):
        task.problems("test", 2)


@pytest.mark.parametrize("data,name,needle", [
    ("not json\n", "data.jsonl", "line 1: not a JSON object"),
    ('{"id": 1}\n', "data.jsonl", "line 1: a problem needs string fields"),
    ("plain text, not gzip", "data.jsonl.gz", "unreadable"),
    (b"\xff\xfe not utf-8\n", "data.jsonl", "not UTF-8"),
])
def test_a_malformed_task_file_is_a_one_line_error(tmp_path, data, name, needle):
    (tmp_path / "card.json").write_text('{"name": "bad", "grader": "number"}')
    (tmp_path / name).write_bytes(data if isinstance(data, bytes) else data.encode())
    with pytest.raises(ConfigError, match=needle):
        DataTask(tmp_path)


@pytest.mark.parametrize("card", [dict(template="Q: {question}"), dict(shots="two"), dict(stop=[1]),
                                  dict(shots=1, few_shot=[dict(prompt="x")]), dict(template="{0}")])
def test_a_malformed_card_is_a_one_line_error(tmp_path, card):
    with pytest.raises(ConfigError, match="card.json needs"):
        DataTask(own_task(tmp_path / "t", **card))


def test_a_chat_model_gets_the_prompt_as_one_user_message(tmp_path):
    from engine.models.model import load_model
    from tests.families import write_llada
    path, _ = write_llada(tmp_path / "llada")
    adapter = load_model(str(path), device="cpu")
    task = DataTask(own_task(tmp_path / "t", template="Question: {prompt}\nAnswer:"))
    (p,) = task.problems("test", 1)
    rendered = adapter.tokenizer.apply_chat_template([{"role": "user", "content": p.prompt}], tokenize=False,
                                                     add_generation_prompt=True)
    assert rendered == "Q : Question: What is 2 + 3?\nAnswer: A :"          # the test tokenizer's template
    assert adapter.encode_prompt(p.prompt) == adapter.tokenizer(rendered, add_special_tokens=False).input_ids


def test_bench_runs_gsm8k_and_a_folder_end_to_end_on_a_tiny_checkpoint(tmp_path, capsys):
    """``python -m engine bench`` through its main in this process (the process's exit is test_cli's)."""
    from engine.__main__ import main
    from tests.families import write_llada
    path, _ = write_llada(tmp_path / "llada")
    own = own_task(tmp_path / "mine")

    def bench(*args):
        capsys.readouterr()
        code = main(["bench", "--model", str(path), "--decoder", "threshold:tau=0.9,block_size=8,gen_length=16",
                     "--json", *args])
        out, err = capsys.readouterr()
        assert code == 0, err
        return json.loads(out)
    for task in ("gsm8k", str(own)):
        (row,) = bench("--task", task, "--n", "1" if task != "gsm8k" else "3")
        for key in ("accuracy", "accuracy_ci95", "nfe", "tpf", "tokens_per_s", "n", "n_prompts", "outcomes"):
            assert key in row
        assert row["n"] == (3 if task == "gsm8k" else 1)
    traces = tmp_path / "traces"                    # --traces: per problem its verdict, text and trace
    (row,) = bench("--task", "gsm8k", "--n", "2", "--traces", str(traces))
    lines = [json.loads(x) for x in (traces / "problems.jsonl").read_text().splitlines()]
    assert [x["index"] for x in lines] == [0, 1] and all(Path(x["trace"]).is_file() for x in lines)
    assert "".join("1" if x["correct"] else "0" for x in lines) == row["outcomes"]
    assert all(x["id"] and x["verdict"] for x in lines)


def test_a_plain_card_keeps_a_chat_models_prompt_out_of_its_template(tmp_path):
    """"chat": false in a card: the bench encodes the prompt as plain text even for a model with a chat template;
    by default (true) the template wraps it."""
    from engine.harness.bench import decode_problem
    from engine.decoders import build_decoder
    from engine.models.model import load_model
    from engine.runtime.jobs import Scheduler
    from engine.tasks.data import DataTask
    from tests.families import write_llada
    path, _ = write_llada(tmp_path / "llada")
    adapter = load_model(str(path), device="cpu")
    assert adapter.tokenizer.chat_template
    plain, chat = (DataTask(own_task(tmp_path / name, chat=flag)).problems("test", 1)[0]
                   for name, flag in (("plain", False), ("chat", True)))
    policy = build_decoder("ar", gen_length=4)

    def decoded(prob):
        ((_, trace, _),) = Scheduler([lambda: decode_problem(adapter, prob, policy, policy.cfg, 0, 0, None)],
                                     1).events()
        return trace
    assert decoded(plain).meta.prompt_ids == adapter.tokenizer(plain.prompt).input_ids
    assert decoded(chat).meta.prompt_ids == adapter.encode_prompt(chat.prompt) != adapter.tokenizer(
        chat.prompt).input_ids
    with pytest.raises(ConfigError):
        DataTask(own_task(tmp_path / "bad", chat="yes"))


def test_humaneval_stops_where_the_common_harnesses_stop():
    task = get_task("humaneval")
    assert task.card["stop"] == ["\nclass", "\ndef", "\n#", "\nif", "\nprint"]
    assert task.cut("    return x\n# a note\ndef more():") == "    return x"
    assert task.cut("    return x\nif __name__ == '__main__':\n    pass") == "    return x"
