"""ParallelBench's task families (engine.tasks.parallelbench): generators, the paper's graders on hand-written
answers, the closed form for shuffle, and the benchmark's own files read from a local copy."""

from __future__ import annotations

import json
import math

import pytest

from engine.errors import ConfigError
from engine.tasks import get_task, load_task_file
from engine.tasks.common import Problem
from engine.tasks.parallelbench import LineTask, shuffle_success

ALL = [*LineTask.ops, "latin", "latin-strict", "sudoku", "sudoku-hard"]


def line(op: str, names: list[str], new: str = "zoe", at: int = 2) -> Problem:
    return Problem("Q : x . A :", "", {"op": op, "line": names, "new": new, "at": at}, task=op)


@pytest.mark.parametrize("name", ALL)
def test_every_task_draws_300_distinct_seeded_problems_its_grader_accepts(name):
    task = get_task(name)
    probs = task.problems("test", 300, seed=0)
    assert len({p.prompt for p in probs}) == 300 and all(task.check(p.solution, p) for p in probs)
    assert [p.prompt for p in task.problems("test", 20, seed=0)] == [p.prompt for p in probs[:20]]
    lengths = {len(p.answer["line"]) for p in probs} if name in LineTask.ops else None
    assert lengths is None or lengths == {3, 4, 5, 6}          # the paper's default lengths


def test_longer_lines_are_an_option_and_the_benchmarks_names_are_its_files_only(monkeypatch):
    """Without --data a benchmark's name refuses in one line naming the flag and the generator here of that
    family, by its own name (it once ran the generator under the benchmark's name)."""
    monkeypatch.setattr("engine.tasks._LOADED", {})          # no file read by an earlier test stands in
    long = get_task("shuffle@7-10").problems("test", 50)
    assert {len(p.answer["line"]) for p in long} <= set(range(7, 11))
    for bench, own in [("waiting_line/insert_random", "insert-random"), ("puzzle/sudoku_n4_12", "sudoku"),
                       ("puzzle/latin_square_n4", "latin"), ("waiting_line_n15/copy", "copy@15-15"),
                       ("paraphrase_summarize/samsum", None)]:
        for call in (get_task, load_task_file):
            with pytest.raises(ConfigError, match="give --data PATH") as e:
                call(f"parallelbench:{bench}")
            assert "\n" not in str(e.value) and (own is None) == ("generator" not in str(e.value))
        assert own is None or get_task(own).name == own
    assert get_task("copy@15-15").lengths == (15, 15)
    for name in ("shuffle@9-3", "waiting_line/copy", "parallelbench:nope/copy"):
        with pytest.raises(ConfigError, match="unknown task"):
            get_task(name)


ABC = ["ann", "bob", "cal"]
CASES = [  # (op, answer, right?) on the line ann bob cal, new item zoe, index 2
    ("copy", "ann bob cal .", True), ("copy", "ann bob cal cal .", False), ("copy", "ann cal bob .", False),
    ("reverse", "cal bob ann .", True), ("reverse", "ann bob cal .", False),
    ("sort", "ann bob cal .", True), ("sort", "bob ann cal .", False),
    ("shuffle", "bob cal ann .", True), ("shuffle", "cal ann bob .", True),
    ("shuffle", "ann bob cal .", False),                     # the input itself is no shuffle
    ("shuffle", "bob bob ann .", False),                     # a repeated name: what independent slots produce
    ("shuffle", "bob ann .", False), ("shuffle", "bob cal ann zoe .", False),
    ("insert-index", "ann zoe bob cal .", True), ("insert-index", "zoe ann bob cal .", False),
    ("remove-index", "ann cal .", True), ("remove-index", "bob cal .", False),
    ("replace-index", "ann zoe cal .", True), ("replace-index", "zoe bob cal .", False),
    ("insert-random", "zoe ann bob cal .", True), ("insert-random", "ann bob cal zoe .", True),
    ("insert-random", "ann zoe cal .", False),               # replaced, not inserted
    ("insert-random", "bob zoe ann cal .", False),           # the rest out of order
    ("insert-random", "ann zoe bob zoe cal .", False),
    ("replace-random", "ann bob zoe .", True), ("replace-random", "ann zoe bob cal .", False),
    ("replace-random", "zoe zoe cal .", False), ("replace-random", "ann bob cal .", False),
    ("remove-random", "ann bob .", True), ("remove-random", "bob cal .", True), ("remove-random", "cal ann .", False),
    ("remove-random", "ann bob cal .", False),
]


@pytest.mark.parametrize("op,text,right", CASES)
def test_line_graders_on_hand_written_answers(op, text, right):
    assert (get_task(op).verdict(text, line(op, ABC)) == "valid") == right


def test_a_line_answer_must_end_once_with_its_full_stop_and_the_tokenizers_spacing_does_not_matter():
    task = get_task("copy")
    assert task.verdict("ann bob cal.", line("copy", ABC)) == "valid"
    assert task.verdict("ann bob cal", line("copy", ABC)) == "malformed"
    assert task.verdict("ann . bob cal .", line("copy", ABC)) == "malformed"


def test_latin_square_graders_the_benchmarks_set_check_and_the_strict_one():
    p = Problem("", "", {"symbols": ["a", "b", "c", "d"]}, "latin")
    loose, strict = get_task("latin"), get_task("latin-strict")
    for task in (loose, strict):
        assert task.check("a b c d ; b a d c ; c d a b ; d c b a .", p)
        assert not task.check("a b c d ; b a d c ; c d a b ; d c a b .", p)      # last column repeats
        assert not task.check("a b c d ; b c d a ; c d a b ; a b c d .", p)      # a repeated row
        assert not task.check("a b c x ; b a x c ; c x a b ; x c b a .", p)      # a symbol not given
        assert not task.check("a b c d ; b a d c ; c d a b .", p)                # three rows
    # the benchmark's check: a row's SET must be the symbols (a 5-cell row passes: columns zip to 4), rows that
    # are not are dropped and the next takes their place, and no closing "." is needed
    assert loose.check("a b c d a ; b a d c ; c d a b ; d c b a .", p)
    assert not strict.check("a b c d a ; b a d c ; c d a b ; d c b a .", p)
    assert loose.check("a b c d ; x y ; b a d c ; c d a b ; d c b a", p)
    assert strict.verdict("a b c d ; b a d c ; c d a b ; d c b a", p) == "malformed"


def test_sudoku_as_the_benchmark_has_it_twelve_givens_one_solution_exact_match():
    from engine.tasks.parallelbench import completions
    task = get_task("sudoku")
    probs = task.problems("test", 50)
    assert all(p.prompt.count("_") == 4 and completions(p.answer["givens"]) == 1 for p in probs)
    p = probs[0]
    assert task.verdict(p.solution, p) == "valid" and task.verdict(p.solution.rstrip(" ."), p) == "valid"
    other = p.solution.replace("1", "x").replace("2", "1").replace("x", "2")      # digits 1 and 2 swapped
    assert task.verdict(other, p) == "wrong"
    # 4-10 blanks leave some puzzles with several solutions: the harder variant, any valid completion
    givens = [["1", "_", "_", "_"], ["_", "_", "_", "_"], ["_", "_", "_", "_"], ["_", "_", "_", "_"]]
    assert completions(givens) == 2 and completions([list("1234"), list("3412"), list("2143"), list("4321")]) == 1


def test_sudoku_hard_needs_the_boxes_and_the_givens():
    givens = [["1", "_", "_", "_"], ["_", "_", "1", "_"], ["_", "1", "_", "_"], ["_", "_", "_", "1"]]
    task, p = get_task("sudoku-hard"), Problem("", "", {"givens": givens}, "sudoku-hard")
    assert task.check("1 2 3 4 ; 3 4 1 2 ; 2 1 4 3 ; 4 3 2 1 .", p)
    assert task.verdict("1 2 3 4 ; 2 1 4 3 ; 3 4 1 2 ; 4 3 2 1 .", p) == "wrong"    # a Latin square, boxes break
    assert task.verdict("2 1 4 3 ; 4 3 2 1 ; 1 2 3 4 ; 3 4 1 2 .", p) == "ignores givens"


def test_the_training_mix_keeps_its_stream():
    """unmask-parallel-small learnt the mix: its puzzles stay Unmask's (latin's generator, sudoku-hard's)."""
    from engine.tasks.parallelbench import ParallelMix
    probs = ParallelMix().problems("train", 400, seed=1)
    assert {p.task for p in probs} >= {"latin", "sudoku-hard"} and "sudoku" not in {p.task for p in probs}


def test_the_closed_form_for_shuffle():
    assert shuffle_success([1, 1, 1, 1], 4) == 1.0                            # one slot a forward: no loss
    assert math.isclose(shuffle_success([4], 4), math.factorial(4) / 4 ** 4)  # all at once: 24 / 256
    assert math.isclose(shuffle_success([2, 1, 1], 4), 12 / 16)               # 4 * 3 / 4^2, then certain
    assert math.isclose(shuffle_success([2, 2], 4), (12 / 16) * (2 / 4))


def test_humaneval_without_the_flag_is_refused_not_scored_zero(capsys):
    from engine.__main__ import main
    assert main(["bench", "--task", "humaneval", "--n", "1", "--model", "unmask-tasks-small"]) == 2
    assert "--allow-code-execution" in capsys.readouterr().err


def test_the_experiments_prediction_reads_each_forwards_commits_from_the_trace():
    """The closed form fed with a decode's own grouping: a forward that commits two of four names, then two
    forwards of one: 4 * 3 / 4^2 = 0.75; AR's one slot a forward: 1; copy: 1 whatever the grouping."""
    from types import SimpleNamespace

    import numpy as np
    from tools.experiments.parallelbench import name_groups, predicted

    def rec(committed):
        return SimpleNamespace(positions=np.arange(10, 16), committed=np.array(committed, bool))
    trace = SimpleNamespace(meta=SimpleNamespace(prompt_len=10), records=[
        rec([1, 0, 1, 0, 0, 0]), rec([0, 0, 0, 0, 0, 0]), rec([0, 1, 0, 0, 0, 0]), rec([0, 0, 0, 1, 1, 1])])
    assert name_groups(trace, 4) == [2, 1, 1]
    prob = SimpleNamespace(answer={"line": ["a", "b", "c", "d"]})
    assert math.isclose(predicted("shuffle", [(prob, trace)]), 0.75)
    assert predicted("copy", [(prob, trace)]) == 1.0 and predicted("sort", [(prob, trace)]) is None


def test_the_sweep_offers_the_families_only_on_the_model_that_knows_them_and_the_preset_grid():
    from types import SimpleNamespace
    from engine.errors import UserError
    from explorer.page.sweep import PRESETS, check_task, sweep_specs
    page = SimpleNamespace(model_infos={"unmask-parallel-small": {"task": "parallel"},
                                        "unmask-tasks-small": {"task": "mix"}})
    check_task(page, "unmask-parallel-small", "shuffle")
    check_task(page, "unmask-tasks-small", "story")
    for model, task in (("unmask-tasks-small", "shuffle"), ("unmask-parallel-small", "story")):
        with pytest.raises(UserError, match="was not trained on"):
            check_task(page, model, task)
    specs = sweep_specs("parallelism vs dependence", "0.9,0.5", "8", "", 1.0)
    assert "parallelism vs dependence" in PRESETS and specs == [
        "ar:temperature=1", "llada:steps=8,block_size=8,temperature=1", "llada:steps=2,block_size=8,temperature=1",
        "llada:steps=1,block_size=8,temperature=1", "threshold:tau=0.9,block_size=8,temperature=1",
        "threshold:tau=0.5,block_size=8,temperature=1"]


def test_the_figure_draws_from_the_saved_results():
    """The SVG of results/parallelbench_*.json: both tasks' points and the closed form where it applies."""
    from pathlib import Path
    from tools.experiments.parallelbench import figure
    path = Path(__file__).resolve().parent.parent / "results" / "parallelbench_unmask-parallel-small.json"
    res = json.loads(path.read_text())["results"]
    svg = figure(res)
    assert svg.startswith("<svg") and svg.count("<circle") > 2 * len(res["shuffle"])
    assert "closed form s2d2" not in svg and "closed form llada" in svg
