"""Controls: the prompt, the model, the decoder and every catalogue parameter as a control.

Each control is made from its ``engine.catalogue.catalogue`` entry (type, range on the page, label, help); its
elem_id is the parameter's name. Parameters shared by several decoders (τ, B, steps) are one control;
``decoder_params`` maps the page's values onto what the chosen decoder takes, clamped to that decoder's range.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from functools import partial

import gradio as gr

from explorer.page.context import shown_error

from engine.catalogue import catalogue
from engine.catalogue.catalogue import Param

# a decoder's own parameters are the group named after it, titled in its catalogue entry
GROUP_TITLES = {**{d.name: d.title for d in catalogue.DECODERS.values()
                   if any(p.group == d.name for p in catalogue.PARAMS.values())},
                "sampling": "Sampling", "engine": "Engine (cache, stop, commit forward)"}


@dataclass
class Controls:
    prompt: gr.Textbox
    examples: gr.Dropdown   # held-out problems, each with what to try
    model: gr.Dropdown
    model_card: gr.Markdown
    decoder: gr.Dropdown
    decoder_info: gr.Markdown
    values: dict            # parameter name -> component
    boxes: dict             # group -> accordion
    run: gr.Button
    stop: gr.Button
    tour: gr.Button

    @property
    def keys(self) -> list[str]:
        return list(self.values)

    @property
    def components(self) -> list:
        return list(self.values.values())


def control_for(p: Param, visible: bool = True):
    """The Gradio control of one catalogue parameter."""
    kw = dict(label=p.label, info=p.help, elem_id=p.name, visible=visible)
    if p.type is bool:
        return gr.Checkbox(p.default, **kw)
    if p.choices:
        return (gr.Radio if len(p.choices) <= 3 else gr.Dropdown)(list(p.choices), value=p.default, **kw)
    if p.type is str:                        # a model name (the drafter): only the embedded models on the page
        return gr.Dropdown(["", *catalogue.embedded_names()], value=p.default, **kw)
    lo, hi = p.page or (p.lo, p.hi)
    if p.step is None:                       # unbounded-looking integers (the seed): a number box
        return gr.Number(value=p.default, precision=0, minimum=lo, maximum=hi, **kw)
    if p.open_lo:
        lo = lo + p.step
    if p.open_hi:
        hi = hi - p.step
    digits = max(0, -math.floor(math.log10(p.step))) if p.step < 1 else 0   # 0.05 + 0.01 reads 0.06, not 0.0600…01
    return gr.Slider(round(lo, digits), round(hi, digits), value=p.default, step=p.step, **kw)


TRY = {"story": "at T = 1, drag τ down: parallel commits start to contradict",
       "picks": "at T = 1, B 16, τ 0.3 parallel commits repeat items; S2D2 (router always, γ 2) rejects and repairs",
       "arith": "greedy, the model is sure: few forwards whatever τ"}


def example_choices(rows: list | None) -> list[tuple[str, str]]:
    """The held-out problems as (label, prompt), each saying what to try."""
    return [(f"{prob.task} · {shown}" + (f" — {TRY[prob.task]}" if prob.task in TRY else ""), shown)
            for shown, prob in (rows or [])[:12]]


def decoder_choices(info: dict | None) -> list[tuple[str, str]]:
    """The decoder menu in plain words, grouped; only the decoders that apply to the model (the card names the
    others with the reason: gradio's dropdown has no disabled entries)."""
    fits = {d for d, why in (info or {}).get("decoders", {}).items() if why is None} or set(catalogue.DECODERS)
    return [(catalogue.menu_label(d), d) for d in catalogue.MENU if d in fits]


def applies(decoder) -> set[str]:
    """The parameters the decoder reads (none for a name that is not a decoder)."""
    return set(catalogue.params_of(decoder)) if decoder in catalogue.DECODERS else set()


def build_run_bar(page) -> tuple:
    """Prompt, held-out problems, model, decoder, Run, Stop and the tour: one bar above the output."""
    rows = page.examples.get(page.default_model, [])
    info = page.model_infos.get(page.default_model)
    with gr.Row(elem_id="run-bar", equal_height=False):
        with gr.Column(scale=5, min_width=260):
            prompt = gr.Textbox(label="Prompt", lines=2, value=rows[0][0] if rows else "",
                                max_length=catalogue.MAX_PROMPT_CHARS, elem_id="prompt")
            examples = gr.Dropdown(example_choices(rows), value=None, label="Try a held-out problem",
                                   elem_id="examples")
        with gr.Column(scale=3, min_width=220):
            model = gr.Dropdown([(picker_label(m, page.model_infos.get(m)), m) for m in page.models],
                                value=page.default_model, label="Model", elem_id="model")
            # allow_custom_value: a run of another model (a tour stop) sets the model and this menu in one update,
            # and the model's own change event may then send the previous decoder against the new menu; every
            # handler checks the decoder's name itself (catalogue.decoder)
            decoder = gr.Dropdown(decoder_choices(info), value=catalogue.DEFAULT_DECODER, label="Decoder",
                                  elem_id="decoder", allow_custom_value=True)
        with gr.Column(scale=1, min_width=120, elem_classes=["um-run-buttons"]):
            run = gr.Button("Run", variant="primary", elem_id="run")
            stop = gr.Button("Stop", variant="stop", elem_id="stop", size="sm")
            tour = gr.Button("Guided tour", elem_id="tour-start", size="sm")
    return prompt, examples, model, decoder, run, stop, tour


def build_params(page, bar: tuple) -> Controls:
    """The chosen decoder's parameters (its box open, Sampling and Engine collapsed), then the model's card; a
    control the decoder does not read is hidden."""
    prompt, examples, model, decoder, run, stop, tour = bar
    reads = applies(catalogue.DEFAULT_DECODER)
    info = gr.Markdown(catalogue.DECODERS[catalogue.DEFAULT_DECODER].summary, elem_id="decoder-info")
    values, boxes = {}, {}
    for name, p in catalogue.PARAMS.items():
        if p.group == "main":
            values[name] = control_for(catalogue.shared_param(name), name in reads)
    for group, title in GROUP_TITLES.items():
        with gr.Accordion(title, open=group == catalogue.DEFAULT_DECODER, visible=box_visible(group, reads),
                          elem_id=f"box-{group}") as boxes[group]:
            for name, p in catalogue.PARAMS.items():
                if p.group == group:
                    values[name] = control_for(catalogue.shared_param(name), name in reads)
    card = gr.Markdown(model_summary(page.model_infos.get(page.default_model),
                                     page.examples.get(page.default_model)), elem_id="model-card")
    return Controls(prompt, examples, model, card, decoder, info, values, boxes, run, stop, tour)


def build_controls(page) -> Controls:
    """The run bar and the parameter panel together (one column; the page lays them out apart)."""
    return build_params(page, build_run_bar(page))


def box_visible(group: str, reads: set[str]) -> bool:
    return any(p.group == group for k, p in catalogue.PARAMS.items() if k in reads)


def decoder_params(decoder: str, values: dict) -> dict:
    """The page's control values -> the chosen decoder's parameters, each clamped into that decoder's range."""
    out = {}
    for name, p in catalogue.params_of(decoder).items():
        if name in values and values[name] is not None:
            value = p.clamp(p.coerce(values[name]), page=False)
            out[name] = p.default if p.choices and value not in p.choices else value   # another decoder's choice
    return out


def on_decoder(keys: list[str], decoder: str):
    """Describe the decoder, show only the parameters it reads and open the box of its own."""
    key = decoder if isinstance(decoder, str) else None
    d, reads = catalogue.DECODERS.get(key), applies(key)
    return (d.summary if d else "", *(gr.update(visible=box_visible(g, reads), open=key == g) for g in GROUP_TITLES),
            *(gr.update(visible=k in reads) for k in keys))


# what a switch of decoder carries over: the task's and the engine's settings (length, sampling, cache), not the
# decoder's own dials
CARRIED_GROUPS = ("sampling", "engine")


def decoder_defaults(keys: list[str], decoder, *values) -> tuple:
    """A decoder the visitor picked from the menu: each of its own dials (τ, B, steps, its box) to the decoder's
    default, so S2D2 or TSPD + CE do not start at the opening story's τ 1 (SimSD took 88 forwards there), and one
    line saying which dials moved. A run shown (a link, the tour) sets the decoder and its dials itself: this
    answers the menu's input only."""
    params = catalogue.params_of(decoder) if isinstance(decoder, str) and decoder in catalogue.DECODERS else {}
    out, moved = [], []
    for k, v in zip(keys, values):
        p = params.get(k)
        own = p is not None and k not in ("gen_length", "preset") and catalogue.PARAMS[k].group not in CARRIED_GROUPS
        if not own or v == p.default:
            out.append(gr.skip())
            continue
        out.append(p.default)
        moved.append(f"{catalogue.PARAMS[k].label.split(' (')[0]} {v} → {p.default}")
    if moved:
        gr.Info(html.escape(f"{decoder}'s defaults: " + ", ".join(moved) + " (length, sampling and engine "
                            "settings carried over)"))
    return tuple(out)


def on_preset(keys: list[str], name: str):
    vals = next((d.presets[name] for d in catalogue.DECODERS.values() if isinstance(name, str) and d.presets
                 and name in d.presets), {})
    return tuple(gr.update(value=vals[k]) if k in vals else gr.skip() for k in keys)


def picker_label(name: str, info: dict | None) -> str:
    """A model's name in the picker, with its short note if its card has one (a model shipped below its target)."""
    short = (info or {}).get("note_short")
    return f"{name} ({short})" if short else name


def model_summary(info: dict | None, examples: list | None = None) -> str:
    """The picker's card: family, size, device and dtype, the block size it was trained with, its paired drafter,
    the tasks it knows with one example each, and which decoders apply (the others with the reason)."""
    if not info:
        return ""
    ok = [d for d, why in info["decoders"].items() if why is None]
    by_reason: dict[str, list[str]] = {}
    for d, why in info["decoders"].items():
        if why is not None:                          # one reason, said once, for the decoders that share it
            by_reason.setdefault(why.removeprefix(d + " ").replace(f" {d} ", " "), []).append(d)
    off = [", ".join(f"~~{d}~~" for d in ds) + f" ({why if len(ds) == 1 else why.split(';')[-1].strip()})"
           for why, ds in by_reason.items()]
    size = f"{info['params'] / 1e6:.1f} M" if info["params"] < 1e9 else f"{info['params'] / 1e9:.1f} B"
    cache = {"block_causal": "exact block KV cache", "full": "full attention, no cache",
             "canvas": "encoder KV cache, uniform-noise canvas"}.get(info["attention"], info["attention"])
    block = "canvas length" if info["attention"] == "canvas" else "trained with block size"
    lines = [f"**{info['family']}** · {size} parameters · {info['device']} / {info['dtype']} · {cache}"
             + (f" · {block} {info['block_size']}" if info.get("block_size") else "")]
    if info.get("note"):
        lines.append(html.escape(info["note"]))
    if info.get("drafter"):
        lines.append(f"Paired drafter (SimSD): `{info['drafter']}`")
    first: dict[str, str] = {}
    for shown, prob in examples or []:
        first.setdefault(prob.task, shown)
    if first:
        lines.append("Knows: " + "; ".join(f"*{t}* — “{html.escape(e)}”" for t, e in first.items()))
    lines.append(f"Decoders: {', '.join(ok)}" + (f"; not for this model: {'; '.join(off)}" if off else ""))
    return "  \n".join(lines)


def on_model(page, model: str, decoder: str):
    """New examples, the model's card and its decoder menu; the prompt and the decoder settings stay, unless the
    decoder does not apply to the new model (a DiffusionGemma takes only ``uniform``): then the first that does."""
    if not isinstance(model, str) or model not in page.models:
        raise shown_error("model must be one of the offered names")
    rows, info = page.examples.get(model, []), page.model_infos.get(model)
    menu = decoder_choices(info)
    keep = isinstance(decoder, str) and decoder in {d for _, d in menu}
    # a kept decoder is not sent again: this answer may arrive after a later update set another run's decoder
    # (the tour moving on), which it must not undo
    return (gr.Dropdown(choices=example_choices(rows), value=None), model_summary(info, rows),
            gr.Dropdown(choices=menu) if keep else gr.Dropdown(choices=menu, value=menu[0][1]))


def prompt_for_model(page, model, prompt):
    """A visitor's own switch of model (not a run shown, which brings its prompt): the new model's first example
    replaces a prompt that was another model's example; a prompt the visitor typed stays."""
    rows = page.examples.get(model, []) if isinstance(model, str) else []
    mine = {r[0] for r in rows}
    examples = {r[0] for rs in page.examples.values() for r in rs}
    if rows and prompt not in mine and (not prompt or prompt in examples):
        return rows[0][0]
    return gr.skip()


def example_prompt(choice):
    """A chosen held-out problem: its prompt (the dropdown's value is the prompt as shown)."""
    return choice if isinstance(choice, str) and choice else gr.skip()


def wire_controls(page, c: Controls) -> None:
    # gradio's page keeps every progress target an event ever had, and walks the layout for each of them at every
    # step of every later event: a switch of decoder (the tour's, a link's) marks the decoder's card alone, not the
    # ninety controls it rewrites (which would make each later status message walk ten times the nodes)
    card = dict(show_progress_on=[c.decoder_info])
    c.decoder.change(partial(on_decoder, c.keys), c.decoder, [c.decoder_info, *c.boxes.values(), *c.components],
                     **card)
    c.decoder.input(partial(decoder_defaults, c.keys), [c.decoder, *c.components], c.components,
                    show_progress="hidden", **card)
    c.values["preset"].change(partial(on_preset, c.keys), c.values["preset"], c.components, show_progress="hidden",
                              **card)
    c.model.change(partial(on_model, page), [c.model, c.decoder], [c.examples, c.model_card, c.decoder])
    c.model.input(partial(prompt_for_model, page), [c.model, c.prompt], c.prompt, show_progress="hidden")
    c.examples.change(example_prompt, c.examples, c.prompt)
