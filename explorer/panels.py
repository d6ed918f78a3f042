"""The Compare, Sweep and Masks tabs: each a small panel wired to the shared prompt box and decode service."""

from __future__ import annotations

import gradio as gr

from engine.tasks.arith import extract_answer
from explorer.grid import Grid
from explorer.views import heatmaps
from explorer.views.compare import compare_summary
from explorer.views.mask_explorer import KINDS, mask_explorer
from explorer.views.sweep import sweep_figure, sweep_table


def compare_tab(service, prompt, answers: dict) -> None:
    gr.Markdown("Two decoder settings on the prompt above, side by side. Settings use the CLI's SPEC syntax.")
    with gr.Row():
        spec_a = gr.Textbox("threshold:tau=0.9,block_size=8", label="A", elem_id="spec-a")
        spec_b = gr.Textbox("s2d2:preset=sdar-a", label="B", elem_id="spec-b")
    go_btn = gr.Button("Compare", elem_id="compare")
    out = gr.HTML(elem_id="compare-out")
    with gr.Row():
        fig_a, fig_b = gr.Plot(label="A: mask state"), gr.Plot(label="B: mask state")

    def run(p, a, b):
        try:
            ta, tb = service.run_spec(p, a), service.run_spec(p, b)
        except ValueError as e:
            raise gr.Error(str(e)) from None
        ans = answers.get((p or "").strip())
        return (compare_summary(ta, tb, ans, extract_answer), heatmaps.mask_state(ta, None, Grid.of(ta)),
                heatmaps.mask_state(tb, None, Grid.of(tb)))

    go_btn.click(run, [prompt, spec_a, spec_b], [out, fig_a, fig_b], concurrency_id="model", concurrency_limit=1)


def sweep_tab(service):
    """Returns (point dropdown, open button) for the page to wire to its main views."""
    gr.Markdown("A grid of settings on held-out problems: accuracy against speed, with the Pareto frontier.")
    with gr.Row():
        decoder = gr.Dropdown(["threshold", "s2d2", "tspd", "llada"], value="threshold", label="decoder")
        taus = gr.Textbox("0.5,0.7,0.9", label="τ values")
        blocks = gr.Textbox("4,8,16", label="block sizes")
        extra = gr.Textbox("", label="other keys (k=v,...)", placeholder="router=score,cost=1")
        n = gr.Slider(5, 200, value=20, step=5, label="problems")
    go_btn = gr.Button("Sweep", elem_id="sweep")
    fig = gr.Plot(label="accuracy vs speed")
    table = gr.HTML()
    with gr.Row():
        point = gr.Dropdown([], label="open a setting on the prompt above", scale=4)
        open_btn = gr.Button("Open", scale=1)

    def run(dec, tau_s, b_s, ex, n_v, progress=gr.Progress()):
        try:
            tau_v = [float(t) for t in tau_s.split(",") if t.strip()] or [0.9]
            b_v = [int(b) for b in b_s.split(",") if b.strip()] or [8]
        except ValueError:
            raise gr.Error("τ values and block sizes must be comma-separated numbers") from None
        tail = f",{ex.strip()}" if ex.strip() else ""
        key = "steps" if dec == "llada" else "tau"
        specs = [f"{dec}:{key}={t if dec != 'llada' else int(b)},block_size={b}{tail}" for b in b_v
                 for t in (tau_v if dec != "llada" else [0])]
        try:
            rows = service.sweep(specs, int(n_v), progress=lambda i, total: progress(i / total))
        except ValueError as e:
            raise gr.Error(str(e)) from None
        return sweep_figure(rows), sweep_table(rows), gr.update(choices=[r["spec"] for r in rows], value=None)

    go_btn.click(run, [decoder, taus, blocks, extra, n], [fig, table, point], concurrency_id="model",
                 concurrency_limit=1)
    return point, open_btn


def masks_tab() -> None:
    gr.Markdown("The attention masks the engine builds (from `engine.masks`), for any block size and span.")
    with gr.Row():
        kind = gr.Radio(list(KINDS), value="2L verifier", label="pattern")
        B = gr.Slider(1, 16, value=4, step=1, label="B")
        start = gr.Slider(0, 15, value=1, step=1, label="span start (first masked index)")
        length = gr.Slider(1, 16, value=2, step=1, label="span length")
    fig = gr.Plot(value=mask_explorer("2L verifier", 4, 1, 2), label="mask")
    for c in (kind, B, start, length):
        c.change(lambda k, b, s, n: mask_explorer(k, b, s, n), [kind, B, start, length], fig, show_progress="hidden")
