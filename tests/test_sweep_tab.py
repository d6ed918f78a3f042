"""The Sweep tab's handler on the batched path: a row joins the plot as each setting finishes."""

from __future__ import annotations

import asyncio

import pytest

from engine.errors import UserError
from engine.harness.service import DecodeService
from explorer.page.context import Page
from explorer.page.sweep import run_sweep, wrong_answers


def test_the_sweep_streams_a_row_per_finished_setting(sdar_dir):
    service = DecodeService(default_model=str(sdar_dir), max_seconds=60)
    page = Page(service, {}, models=(str(sdar_dir),))

    async def collect():
        return [out async for out in run_sweep(page, str(sdar_dir), "threshold", "0.5,0.9", "4", "", "arith", 6,
                                               0.0, progress=lambda *a, **k: None)]
    outs = asyncio.run(collect())
    tables = [t for _, t, _, _ in outs if isinstance(t, str)]
    assert len(tables) >= 2 and tables[0] != tables[-1]           # the table grew while the sweep ran
    final_fig, final_table, points, result = outs[-1]
    assert all(s in final_table for s in ("ar", "threshold:tau=0.5,block_size=4", "threshold:tau=0.9,block_size=4"))
    assert [c[0] if isinstance(c, tuple) else c for c in points["choices"]] == [
        "ar", "threshold:tau=0.5,block_size=4", "threshold:tau=0.9,block_size=4"]
    assert result["task"] == "arith" and [r["spec"] for r in result["rows"]] == [c[1] if isinstance(c, tuple) else c
                                                                                for c in points["choices"]]


def test_a_wrong_answer_of_a_sweep_opens_as_the_run_the_sweep_decoded():
    """Sampled picks (T = 1, B 16, τ 0.3) lose problems; each wrong answer listed decodes again, from the problem
    and the seed the sweep gave it, to the same wrong text; a right one cannot be asked for."""
    from engine.tasks import get_task
    service = DecodeService(default_model="unmask-tasks-small", max_seconds=120)
    page = Page(service, {}, models=("unmask-tasks-small",))

    async def collect():
        return [out async for out in run_sweep(page, "unmask-tasks-small", "threshold", "0.3", "16", "", "picks", 20,
                                               1.0, progress=lambda *a, **k: None)]
    *_, result = asyncio.run(collect())[-1]
    spec = "threshold:tau=0.3,block_size=16,temperature=1"
    choices = wrong_answers(result, spec)["choices"]
    row = next(r for r in result["rows"] if r["spec"] == spec)
    assert len(choices) == row["outcomes"].count("0") >= 1
    problems = get_task("picks").problems("test", 20, seed=0)
    for label, i in choices[:3]:
        prompt, name, params, prob = service.sweep_problem("picks", spec, row["outcomes"], i)
        assert prompt == problems[i].prompt and label.startswith(f"#{i + 1}:")
        tr = service.run(prompt, name, params)
        assert not get_task("picks").check(tr.meta.text, problems[i]), tr.meta.text
        page.remember(prob)                       # opened on the page: its run gets the checker's verdict
        assert prob is problems[i] or prob.prompt == problems[i].prompt
        assert page.verdict(tr) == get_task("picks").verdict(tr.meta.text, prob) != "valid"
    right = row["outcomes"].index("1")
    with pytest.raises(UserError):
        service.sweep_problem("picks", spec, row["outcomes"], right)


def test_a_data_task_sweeps_on_a_real_tokenizer_and_lists_its_wrong_answers(tmp_path):
    """GSM8K on a tiny random LLaDA checkpoint (a real tokenizer): the card's generation length joins every
    setting, the wrong answers are GSM8K's problems, and one opens as its run; on an embedded model (a closed
    vocabulary) the page refuses GSM8K with the reason."""
    from engine.tasks import get_task
    from tests.families import write_llada
    path, _ = write_llada(tmp_path / "llada")
    service = DecodeService(default_model=str(path), max_seconds=120)
    page = Page(service, {}, models=(str(path), "unmask-tasks-small"),
                model_infos={str(path): service.model_info(str(path)),
                             "unmask-tasks-small": service.model_info("unmask-tasks-small")})

    async def collect(model, task):
        return [out async for out in run_sweep(page, model, "threshold", "0.9", "32", "", task, 2, 0.0,
                                               progress=lambda *a, **k: None)]
    *_, result = asyncio.run(collect(str(path), "gsm8k"))[-1]
    assert result["task"] == "gsm8k" and all("gen_length=256" in r["spec"] or r["spec"].startswith("ar")
                                             for r in result["rows"])
    spec = next(r["spec"] for r in result["rows"] if r["spec"].startswith("threshold"))
    choices = wrong_answers(result, spec)["choices"]
    problems = get_task("gsm8k").problems("test", 2)
    assert choices and all(problems[i].prompt.startswith("Question: ") for _, i in choices)
    row = next(r for r in result["rows"] if r["spec"] == spec)
    prompt, name, params, prob = service.sweep_problem("gsm8k", spec, row["outcomes"], choices[0][1])
    assert prompt == problems[choices[0][1]].prompt and params["gen_length"] == "256"
    page.remember(prob)                           # GSM8K's grader gives an opened problem's verdict too
    tr = service.run(prompt, name, params)
    assert page.verdict(tr) == get_task("gsm8k").verdict(tr.meta.text, prob)
    with pytest.raises(Exception, match="needs a model with a real tokenizer"):
        asyncio.run(collect("unmask-tasks-small", "gsm8k"))


def test_the_default_sweep_shows_the_trade_off_on_the_default_model():
    """The Sweep as a visitor first finds it (picks at T = 1 on the page's model): accuracy moves with the setting,
    AR on top, so the first run teaches (arithmetic at T = 0 was 1.000 everywhere on some grids)."""
    from explorer.page.sweep import DEFAULT, sweep_specs
    service = DecodeService(default_model="unmask-tasks-small", max_seconds=120)
    specs = sweep_specs("threshold", DEFAULT["taus"], DEFAULT["blocks"], "", DEFAULT["temperature"])
    rows = service.sweep(specs, 20, task=DEFAULT["task"], model="unmask-tasks-small")
    acc = {r["spec"]: r["accuracy"] for r in rows}
    assert max(acc.values()) - min(acc.values()) >= 0.15, acc
    assert acc["ar:temperature=1"] >= max(v for k, v in acc.items() if "block_size=16" in k), acc
