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
from explorer.views.attention import attention_mask
from explorer.views.router import router_timeline
from explorer.views.summary import render_summary
from explorer.views.text import render_text
from explorer.views.verifier import verifier_map

CSS_PATH = Path(__file__).resolve().parent.parent / "assets" / "style.css"

DECODERS = {
    "threshold": "**Threshold** (Fast-dLLM): commit every masked token with confidence ≥ τ, at least one per step.",
    "llada": "**LLaDA** fixed steps: each block gets `steps` forwards; the most confident tokens are kept.",
    "ar": "**Autoregressive**: the same model with block size 1, one token per forward.",
    "s2d2": "**S2D2** self-speculation: the block-diffusion draft is checked by the same model in AR mode (one "
            "extra forward, the 2L mask) when the router judges it worth the cost c.",
}
S2D2_PRESETS = {
    "": {},
    "sdar-a": dict(block=4, router="score", score_type="static", tau_score=0.0, cost=1.0, tau=0.85, beta=1.0,
                   draft_ver=True, cache_ver=True),
    "sdar-b": dict(block=16, router="score", score_type="static", tau_score=0.0, cost=0.0, tau=0.85, beta=1.0,
                   draft_ver=True, cache_ver=True),
    "quality": dict(block=4, router="span", tau_span=2, beta=0.7),
    "speed": dict(block=16, router="hysteresis", tau_on=1.0, tau_off=-2.0),
}
S2D2_KEYS = ("router", "estimator", "beta", "cost", "score_type", "tau_span", "tau_score", "tau_on", "tau_off",
             "acceptance", "draft_ver", "cache_ver")


def decoder_params(decoder: str, c: dict) -> dict:
    """Map the page's control values onto the parameters each decoder takes."""
    common = dict(gen_length=int(c["gen_length"]), temperature=float(c["temperature"]), seed=int(c["seed"]))
    if decoder == "ar":
        return common
    if decoder == "llada":
        return dict(common, block_size=int(c["block"]), steps=int(c["steps"]))
    if decoder == "s2d2":
        return dict(common, block_size=int(c["block"]), tau=float(c["tau"]), **{k: c[k] for k in S2D2_KEYS})
    return dict(common, block_size=int(c["block"]), tau=float(c["tau"]))


def render_all(trace, step: int | None, answers: dict):
    g = Grid(trace)
    key = trace.meta.get("prompt", "").strip()
    correct = extract_answer(trace.meta["text"]) == answers[key] if key in answers else None
    return (render_summary(trace, correct), render_text(trace, step, g),
            heatmaps.mask_state(trace, step, g), heatmaps.confidence(trace, step, g),
            verifier_map(trace, step, g), router_timeline(trace, step), attention_mask(trace, step))


def build_demo(service, examples: list[tuple[str, int]]) -> gr.Blocks:
    answers = {p: a for p, a in examples}
    with gr.Blocks(title="Unmask — see how diffusion LMs decode") as demo:
        gr.Markdown("# Unmask\nWatch a diffusion language model unmask its answer, forward by forward: which "
                    "positions are still masked, how confident each candidate is, and what each decoder commits.")
        trace_state = gr.State(None)
        with gr.Row():
            with gr.Column(scale=1, min_width=320):
                prompt = gr.Textbox(label="Prompt", lines=3, value=examples[0][0] if examples else "",
                                    max_length=4000, elem_id="prompt")
                gr.Examples([[p] for p, _ in examples[:8]], inputs=[prompt], label="Held-out problems")
                decoder = gr.Dropdown(list(DECODERS), value="threshold", label="Decoder", elem_id="decoder")
                decoder_info = gr.Markdown(DECODERS["threshold"])
                c = {}
                c["tau"] = gr.Slider(0.05, 1.0, value=0.9, step=0.01, label="τ (threshold)", elem_id="tau")
                c["block"] = gr.Slider(1, 32, value=8, step=1, label="Block size B", elem_id="block")
                c["steps"] = gr.Slider(1, 32, value=8, step=1, label="Steps per block (LLaDA)", elem_id="steps")
                c["gen_length"] = gr.Slider(8, 192, value=64, step=8, label="Generation length", elem_id="gen_len")
                with gr.Accordion("S2D2: router and verifier", open=False) as s2d2_box:
                    preset = gr.Dropdown(list(S2D2_PRESETS), value="", label="Preset (fills the controls)")
                    c["router"] = gr.Dropdown(["score", "always", "never", "span", "hysteresis", "ucb"],
                                              value="score", label="Router")
                    c["estimator"] = gr.Dropdown(["entropy", "margin", "hard_entropy", "confidence",
                                                  "linear_margin", "renyi2"], value="entropy",
                                                 label="Acceptance estimator α")
                    c["beta"] = gr.Slider(0.0, 5.0, value=1.0, step=0.05, label="β (entropy sharpness)")
                    c["cost"] = gr.Slider(0.0, 8.0, value=1.0, step=0.1, label="c (verification cost)")
                    c["score_type"] = gr.Radio(["static", "dynamic"], value="static", label="Score K̂ − c or K̂ − c·N_hi")
                    c["tau_score"] = gr.Slider(-5.0, 5.0, value=0.0, step=0.1, label="τ_score")
                    c["tau_span"] = gr.Slider(1, 32, value=2, step=1, label="τ_span (minimum span)")
                    c["tau_on"] = gr.Slider(-5.0, 5.0, value=1.0, step=0.1, label="τ_on (hysteresis)")
                    c["tau_off"] = gr.Slider(-8.0, 4.0, value=-2.0, step=0.1, label="τ_off (hysteresis)")
                    c["acceptance"] = gr.Radio(["stochastic", "greedy"], value="stochastic", label="Acceptance")
                    c["draft_ver"] = gr.Checkbox(False, label="partial-causal drafting (draft_ver)")
                    c["cache_ver"] = gr.Checkbox(False, label="AR-like caching (cache_ver)")
                with gr.Accordion("Sampling", open=False):
                    c["temperature"] = gr.Slider(0.0, 2.0, value=0.0, step=0.05, label="Temperature (0 = greedy)")
                    c["seed"] = gr.Number(value=0, precision=0, label="Seed")
                run = gr.Button("Run", variant="primary", elem_id="run")
            with gr.Column(scale=2):
                summary = gr.HTML(elem_id="summary")
                text = gr.HTML(elem_id="text")
                step = gr.Slider(1, 2, value=1, step=1, label="Step (scrub a finished run)", elem_id="step")
                with gr.Tabs():
                    with gr.Tab("Decode"):
                        mask_fig = gr.Plot(label="Mask state", elem_id="mask-plot")
                        conf_fig = gr.Plot(label="Confidence", elem_id="conf-plot")
                    with gr.Tab("S2D2"):
                        ver_fig = gr.Plot(label="Verifier map", elem_id="verifier-plot")
                        router_fig = gr.Plot(label="Router timeline", elem_id="router-plot")
                        attn_fig = gr.Plot(label="Attention mask of the step", elem_id="attn-plot")
        keys = list(c)
        views = [summary, text, mask_fig, conf_fig, ver_fig, router_fig, attn_fig]

        def on_run(prompt_v, decoder_v, *values):
            params = decoder_params(decoder_v, dict(zip(keys, values)))
            try:
                for tr in service.stream(prompt_v, decoder_v, params):
                    n = max(1, len(tr.records))
                    yield (*render_all(tr, None, answers), tr, gr.update(maximum=max(2, n), value=n))
            except ValueError as e:  # UserError and ConfigError: shown to this user, the server goes on
                raise gr.Error(str(e)) from None

        def on_step(tr, s):
            if tr is None:
                return tuple(gr.skip() for _ in views)
            return render_all(tr, int(s) - 1, answers)

        def on_preset(name):
            vals = S2D2_PRESETS.get(name, {})
            return tuple(gr.update(value=vals[k]) if k in vals else gr.skip() for k in keys)

        decoder.change(lambda d: (DECODERS.get(d, ""), gr.update(open=d == "s2d2")), decoder,
                       [decoder_info, s2d2_box])
        preset.change(on_preset, preset, [c[k] for k in keys])
        run.click(on_run, [prompt, decoder, *[c[k] for k in keys]], [*views, trace_state, step],
                  concurrency_id="model", concurrency_limit=1)
        step.change(on_step, [trace_state, step], views, show_progress="hidden")
    return demo


def launch_kwargs() -> dict:
    return dict(css=CSS_PATH.read_text() if CSS_PATH.exists() else None)
