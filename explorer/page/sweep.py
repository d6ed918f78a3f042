"""Sweep: a grid of settings on held-out problems, accuracy against TPF and tokens/s with the Pareto frontier;
any point opens as a run on the prompt above, and any of a setting's wrong answers opens as the run the sweep
decoded (its problem, its seed): sweep τ, see where accuracy drops, open the problems it lost. Each setting
decodes its problems eight at a time (batched forwards) and its row appears as soon as it finishes. Stop really
stops: the sweep checks it between problems."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import gradio as gr

from engine.catalogue import catalogue
from engine.catalogue.cards import SweepPreset, cards
from engine.catalogue.params import float_text, int_text
from engine.errors import UserError
from engine.tasks import TASKS as SYNTHETIC
from engine.tasks import get_task, with_task_length
from explorer.page import fair
from explorer.page.context import STATE_TTL_S, Page, fairly, shown_error, slider_number
from explorer.page.worker import DrawClock, follow
from explorer.views.sweep import sweep_figure, sweep_table

TASKS = ("arith", "story", "picks")
# ParallelBench's families, on the model that knows them (unmask-parallel-small): copy's tokens are independent
# given the prompt, shuffle's and the random edits' are not
PARALLEL = ("copy", "reverse", "sort", "shuffle", "insert-random", "replace-random", "latin", "sudoku")
DATA = ("gsm8k", "math500")   # the shipped data tasks the page may grade (HumanEval's tests never run here)
# every grid the Sweep offers: each decoder's dial (Decoder.knob), then the presets the decoders' cards bring
PRESETS = {**{d.name: SweepPreset(d.name, (f"{d.name}:{d.knob}={{t}}",), d.knob)
              for d in catalogue.DECODERS.values() if d.knob},
           **{s.name: s for c in cards().values() for s in c.sweeps}}


@dataclass
class SweepParts:
    point: gr.Dropdown       # a setting of the last sweep
    open: gr.Button          # ... decoded on the prompt above
    wrong: gr.Dropdown       # one of that setting's wrong answers (the problem's index)
    open_wrong: gr.Button    # ... decoded as the sweep decoded it
    result: gr.State         # {"task": name, "rows": the sweep's rows}


# the first sweep a visitor runs shows the trade-off: on picks at T = 1 (many right answers, 50 problems, 50 distinct
# prompts) AR is right on 0.94 [0.84, 0.98] and the threshold rule at τ 0.5, B 16 on 0.70 [0.56, 0.81] (paired
# 14–2, p = 0.0042); the tests/test_sweep_tab.py check is a spread of at least 0.15 on 20 problems
DEFAULT = dict(task="picks", temperature=1.0, taus="0.5,0.7,0.9", blocks="4,8,16", n=50)


def build_sweep(page: Page, model) -> SweepParts:
    """The Sweep tab; the page wires its open buttons to the main views."""
    gr.Markdown("A grid of settings on held-out problems: accuracy against speed, with the Pareto frontier.")
    with gr.Row():
        decoder = gr.Dropdown([*PRESETS], value=catalogue.DEFAULT_DECODER, label="decoder",
                              info="; ".join(f"{s.name}: {s.words}" for s in PRESETS.values()))
        taus = gr.Textbox(DEFAULT["taus"], label="dial values (τ, γ, η, ...)")
        blocks = gr.Textbox(DEFAULT["blocks"], label="block sizes")
        extra = gr.Textbox("", label="other keys (k=v,...)", placeholder="router=score,cost=1")
        task = gr.Dropdown([*TASKS, *PARALLEL, *DATA], value=DEFAULT["task"], label="task", elem_id="sweep-task",
                           info="gsm8k and math500 need a model with a real tokenizer (UNMASK_MODELS); HumanEval's "
                                "tests are never run on the page (python -m engine bench --allow-code-execution)")
        n = gr.Slider(10, 200, value=DEFAULT["n"], step=10, label="problems", elem_id="sweep-n",
                      info="each setting on the same problems; the bars are 95 % intervals")
        temp = gr.Slider(0, 1.5, value=DEFAULT["temperature"], step=0.1, label="temperature T",
                         elem_id="sweep-temperature",
                         info="every setting, AR included, samples at T (a seed per problem)")
    why = gr.Markdown(uncertain_hint(DEFAULT["task"])[1], elem_id="sweep-why")
    task.change(uncertain_hint, task, [temp, why])
    with gr.Row():
        go_btn = gr.Button("Sweep", elem_id="sweep")
        stop_btn = gr.Button("Stop", elem_id="sweep-stop", variant="stop")
    fig = gr.Plot(label="accuracy vs speed")
    table = gr.HTML(elem_id="sweep-table")
    with gr.Row():
        point = gr.Dropdown([], label="a setting: open it on the prompt above", scale=4, elem_id="sweep-point")
        open_btn = gr.Button("Open", scale=1)
    with gr.Row():
        wrong = gr.Dropdown([], label="its wrong answers", scale=4, elem_id="sweep-wrong")
        open_wrong = gr.Button("Open this problem", scale=1, elem_id="sweep-open-wrong")
    result = gr.State(None, time_to_live=STATE_TTL_S)
    evt = go_btn.click(partial(run_sweep, page), [model, decoder, taus, blocks, extra, task, n, temp],
                       [fig, table, point, result], concurrency_id="model", concurrency_limit=fair.CAPACITY,
                       api_name="sweep", show_progress_on=[fig])   # one progress bar (gradio draws one per output)
    stop_btn.click(None, None, None, cancels=[evt])
    point.change(wrong_answers, [result, point], wrong)
    return SweepParts(point, open_btn, wrong, open_wrong, result)


def wrong_answers(result, spec):
    """The chosen setting's wrong answers as (label, problem index), in the sweep's problem order."""
    row = next((r for r in (result or {}).get("rows", []) if r.get("spec") == spec), None)
    if row is None:
        return gr.update(choices=[], value=None, label="its wrong answers")
    problems = get_task(result["task"]).problems("test", len(row["outcomes"]), seed=0)
    choices = [(f"#{i + 1}: {short(p.prompt)}", i) for i, (o, p) in enumerate(zip(row["outcomes"], problems))
               if o == "0"]
    return gr.update(choices=choices, value=None,
                     label=f"its wrong answers: {len(choices)} of {len(row['outcomes'])} problems")


def short(prompt: str, limit: int = 90) -> str:
    body = prompt.removeprefix("Q : ").removesuffix(" A :")
    return body if len(body) <= limit else body[:limit - 1] + "…"


UNCERTAIN = ("story", "picks", "shuffle", "insert-random", "replace-random", "latin")


def uncertain_hint(task):
    """Story and picks have many right answers: at T = 0 every decoder takes the same most likely one and the
    trade-off cannot be seen, so the Sweep moves to T = 1 and says why."""
    if task in UNCERTAIN:
        return 1.0, (f"*{task} has many right answers. At T = 0 every decoder follows the same most likely one, "
                     "so parallel commits rarely disagree and the trade-off is hidden; at T = 1 committing several "
                     "uncertain tokens at once can make them inconsistent, which is what the sweep measures.*")
    return gr.skip(), ""


def check_task(page: Page, model: str, task) -> None:
    """A synthetic task on any model; a data task only on a model with a real tokenizer (an embedded model's
    closed vocabulary cannot write a GSM8K problem)."""
    if task not in (*TASKS, *PARALLEL, *DATA):
        raise UserError(f"task must be one of {', '.join((*TASKS, *PARALLEL, *DATA))}")
    knows = (page.model_infos.get(model) or {}).get("task")
    if (task in PARALLEL) != (knows == "parallel") and knows in SYNTHETIC:
        raise UserError(f"{task} is a task {model} was not trained on: ParallelBench's tasks run on "
                        "unmask-parallel-small, the others on the tasks models")
    if task in DATA and (page.model_infos.get(model) or {}).get("task") in SYNTHETIC:
        raise UserError(f"{task} needs a model with a real tokenizer: {model} knows only its own synthetic tasks "
                        "(an operator adds checkpoints with UNMASK_MODELS)")


def sweep_specs(dec: str, tau_s: str, b_s: str, extra: str, temperature: float = 0.0) -> list[str]:
    if not all(isinstance(v, str) for v in (tau_s, b_s, extra)):
        raise UserError("τ values, block sizes and other keys are text")
    try:
        # ASCII digits only, as every parameter (float() and int() read "٨" and "８" too)
        tau_v = [float_text(t) for t in tau_s.split(",") if t.strip()][:16] or [0.9]
        b_v = [int_text(b) for b in b_s.split(",") if b.strip()][:16] or [8]
    except ValueError:
        raise UserError("τ values and block sizes must be comma-separated numbers") from None
    tail = f",{extra.strip()}" if extra.strip() else ""
    if temperature:
        tail += f",temperature={temperature:g}"
    bar = catalogue.BASELINE_DECODER       # the quality bar, at the same T
    if not isinstance(dec, str) or dec not in PRESETS:
        raise UserError(f"decoder must be one of {', '.join(PRESETS)}")
    return [f"{bar}:temperature={temperature:g}" if temperature else bar] + [
        f"{one}{',' if ':' in one else ':'}block_size={b}{tail}" for b in b_v for template in PRESETS[dec].templates
        for one in dict.fromkeys(template.format(t=t, b=b) for t in tau_v)]


async def run_sweep(page: Page, model, dec, tau_s, b_s, extra, task, n_v, temp_v=0.0, request: gr.Request = None,
                    progress=gr.Progress()):
    """The sweep runs, once the gate lets it, in a worker (``follow``) that reports progress; Stop, ``/cancel`` or
    a visitor leaving stops it at the next decode, and the request ends only once it has."""
    async for out in fairly(page, "sweep", request, swept(page, model, dec, tau_s, b_s, extra, task, n_v, temp_v,
                                                          progress)):
        yield out


async def swept(page: Page, model, dec, tau_s, b_s, extra, task, n_v, temp_v, progress):
    try:
        slider_number(temp_v, "the temperature", 0, 2)            # a finite number, or the user's error
        temperature = round(min(max(float(temp_v), 0.0), 1.5), 1)
        model = page.check_model(model)
        check_task(page, model, task)
        specs = [with_task_length(s, get_task(task)) for s in sweep_specs(dec, tau_s, b_s, extra, temperature)]
        # not clamped: the service refuses a count outside its limits with its own message
        n = slider_number(n_v, "the number of problems", -2**31, 2**31)
        box = {"done": 0, "total": 1}

        def produce(should_stop):
            yield from page.service.sweep_stream(specs, n, model=model, task=task, should_stop=should_stop,
                                                 client=fair.client(),
                                                 progress=lambda i, total: box.update(done=i, total=total))

        rows, shown, kept = None, None, {"task": task, "rows": []}
        clock = DrawClock(page.service.max_seconds)      # the request's budget holds its last drawing too
        async for f in follow(produce, page.service.max_seconds, heartbeat=True, reserve=clock.reserve):
            rows = f.value
            if not f.final:
                progress(box["done"] / box["total"], desc=f"{box['done']}/{box['total']} decodes")
                fresh = rows is not None and rows is not shown    # a setting finished: its row joins the plot
                shown = rows
                yield (*(await clock.draw(drawn, rows, False)), gr.skip(), gr.skip()) if fresh else (gr.skip(),) * 4
    except UserError as e:
        raise shown_error(str(e)) from None
    if not rows:
        raise shown_error("the sweep stopped before any problem finished")
    kept["rows"] = [dict(spec=r["spec"], outcomes=r["outcomes"]) for r in rows]
    yield (*(await clock.draw(drawn, rows)), gr.update(choices=[r["spec"] for r in rows], value=None), kept)


def drawn(rows: list[dict], final: bool = True) -> tuple:
    """The sweep's figure and table."""
    return sweep_figure(rows), sweep_table(rows, final)
