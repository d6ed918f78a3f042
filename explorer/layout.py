"""The Gradio page: controls on the left, the live decode on the right, a step slider to scrub a finished run.

The page talks to the engine only through a service object (``stream(prompt, decoder, params)`` yielding traces,
``UserError`` for bad input), so this module never touches torch.
"""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from engine.tasks.arith import extract_answer  # pure-python task code, no torch

from explorer.grid import Grid
from explorer.views import heatmaps
from explorer.views.summary import render_summary
from explorer.views.text import render_text

CSS_PATH = Path(__file__).resolve().parent.parent / "assets" / "style.css"

DECODERS = {
    "threshold": "Threshold (Fast-dLLM): commit every masked token with confidence ≥ τ, at least one per step",
    "llada": "LLaDA fixed steps: each block gets `steps` forwards, the most confident tokens are kept",
    "ar": "Autoregressive: the same model with block size 1, one token per forward",
}


def decoder_params(decoder: str, tau: float, block_size: int, steps: int, gen_length: int,
                   temperature: float, seed: int) -> dict:
    """Map the page's controls onto the parameters each decoder takes."""
    common = dict(gen_length=int(gen_length), temperature=float(temperature), seed=int(seed))
    if decoder == "ar":
        return common
    if decoder == "llada":
        return dict(common, block_size=int(block_size), steps=int(steps))
    return dict(common, block_size=int(block_size), tau=float(tau))


def render_all(trace, step: int | None, answers: dict):
    g = Grid(trace)
    correct = None
    key = trace.meta.get("prompt", "").strip()
    if key in answers:
        correct = extract_answer(trace.meta["text"]) == answers[key]
    return (render_summary(trace, correct), render_text(trace, step, g),
            heatmaps.mask_state(trace, step, g), heatmaps.confidence(trace, step, g))


def build_demo(service, examples: list[tuple[str, int]]) -> gr.Blocks:
    answers = {p: a for p, a in examples}
    with gr.Blocks(title="Unmask — see how diffusion LMs decode") as demo:
        gr.Markdown("# Unmask\nWatch a diffusion language model unmask its answer, forward by forward: which "
                    "positions are still masked, how confident each candidate is, and what each decoder commits.")
        trace_state = gr.State(None)
        with gr.Row():
            with gr.Column(scale=1, min_width=300):
                prompt = gr.Textbox(label="Prompt", lines=3, value=examples[0][0] if examples else "",
                                    max_length=4000, elem_id="prompt")
                gr.Examples([[p] for p, _ in examples[:8]], inputs=[prompt], label="Held-out problems")
                decoder = gr.Dropdown(list(DECODERS), value="threshold", label="Decoder", elem_id="decoder")
                decoder_info = gr.Markdown(DECODERS["threshold"])
                tau = gr.Slider(0.05, 1.0, value=0.9, step=0.01, label="τ (threshold)", elem_id="tau")
                block = gr.Slider(1, 32, value=8, step=1, label="Block size B", elem_id="block")
                steps = gr.Slider(1, 32, value=8, step=1, label="Steps per block (LLaDA)", elem_id="steps")
                gen_len = gr.Slider(8, 192, value=64, step=8, label="Generation length", elem_id="gen_len")
                with gr.Accordion("Sampling", open=False):
                    temperature = gr.Slider(0.0, 2.0, value=0.0, step=0.05, label="Temperature (0 = greedy)")
                    seed = gr.Number(value=0, precision=0, label="Seed")
                run = gr.Button("Run", variant="primary", elem_id="run")
            with gr.Column(scale=2):
                summary = gr.HTML(elem_id="summary")
                text = gr.HTML(elem_id="text")
                step = gr.Slider(1, 2, value=1, step=1, label="Step (scrub a finished run)", elem_id="step")
                mask_fig = gr.Plot(label="Mask state", elem_id="mask-plot")
                conf_fig = gr.Plot(label="Confidence", elem_id="conf-plot")

        def on_run(prompt_v, decoder_v, tau_v, block_v, steps_v, gen_v, temp_v, seed_v):
            params = decoder_params(decoder_v, tau_v, block_v, steps_v, gen_v, temp_v, seed_v)
            try:
                last = None
                for tr in service.stream(prompt_v, decoder_v, params):
                    last = tr
                    n = max(1, len(tr.records))
                    yield (*render_all(tr, None, answers), tr, gr.update(maximum=max(2, n), value=n))
            except ValueError as e:  # UserError and ConfigError: shown to this user, the server goes on
                raise gr.Error(str(e)) from None
            if last is None:
                raise gr.Error("The decode produced no steps.")

        def on_step(tr, s):
            if tr is None:
                return gr.skip(), gr.skip(), gr.skip(), gr.skip()
            return render_all(tr, int(s) - 1, answers)

        decoder.change(lambda d: DECODERS.get(d, ""), decoder, decoder_info)
        run.click(on_run, [prompt, decoder, tau, block, steps, gen_len, temperature, seed],
                  [summary, text, mask_fig, conf_fig, trace_state, step],
                  concurrency_id="model", concurrency_limit=1)
        step.change(on_step, [trace_state, step], [summary, text, mask_fig, conf_fig], show_progress="hidden")
    return demo


def launch_kwargs() -> dict:
    return dict(css=CSS_PATH.read_text() if CSS_PATH.exists() else None)
