"""The Gradio page: controls on the left, the live decode on the right, a step slider to scrub a finished run.

The page talks to the engine only through a service object (``stream(prompt, decoder, params)`` yielding traces,
``UserError`` for bad input), so this module never touches torch.
"""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from engine.tasks.arith import extract_answer  # pure-python task code, no torch
from engine import __version__ as ENGINE_VERSION
from engine.spec import parse_spec
from explorer.export import to_csv, to_json
from explorer.grid import Grid
from explorer.state import parse_query, to_query
from explorer.store import canonical_key
from explorer.glossary import GLOSSARY, how_to_read
from explorer.panels import compare_tab, masks_tab, sweep_tab
from explorer.views import attention as attention_view
from explorer.views import candidates as candidates_view
from explorer.views import ce_maps as ce_view
from explorer.views import heatmaps
from explorer.views import mask_explorer as mask_explorer_view
from explorer.views import reasons as reasons_view
from explorer.views import router as router_view
from explorer.views import text as text_view
from explorer.views import summary as summary_view
from explorer.views import trajectory as trajectory_view
from explorer.views import verifier as verifier_view
from explorer.views.attention import attention_mask
from explorer.views.candidates import candidates
from explorer.views.ce_maps import ce_maps
from explorer.views.reasons import reason_map
from explorer.views.router import router_timeline
from explorer.views.summary import previous_delta, render_summary
from explorer.views.text import render_text
from explorer.views.trajectory import trajectories
from explorer.views.verifier import verifier_map

CSS_PATH = Path(__file__).resolve().parent.parent / "assets" / "style.css"

DECODERS = {
    "threshold": "**Threshold** (Fast-dLLM): commit every masked token with confidence ≥ τ, at least one per step.",
    "llada": "**LLaDA** fixed steps: each block gets `steps` forwards; the most confident tokens are kept.",
    "ar": "**Autoregressive**: the same model with block size 1, one token per forward.",
    "s2d2": "**S2D2** self-speculation: the block-diffusion draft is checked by the same model in AR mode (one "
            "extra forward, the 2L mask) when the router judges it worth the cost c.",
    "tspd": "**TSPD + CE** — *our reconstruction (PROPOSED): the paper's method section was not available.* A small "
            "controller reads each token's trajectory; a Kalman filter forecasts its confidence and commits early "
            "when the forecast's lower bound clears τ; oscillating tokens are held back.",
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
TSPD_KEYS = ("controller", "ce", "kappa", "h_max", "tau_s")
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
    if decoder == "tspd":
        return dict(common, block_size=int(c["block"]), tau=min(float(c["tau"]), 0.99),
                    **{k: c[k] for k in TSPD_KEYS})
    return dict(common, block_size=int(c["block"]), tau=float(c["tau"]))


def render_all(trace, step: int | None, answers: dict, selected: int | None = None):
    g = Grid.of(trace)
    key = trace.meta.get("prompt", "").strip()
    correct = extract_answer(trace.meta["text"]) == answers[key] if key in answers else None
    chosen = [selected] if selected is not None else None
    return (render_summary(trace, correct), render_text(trace, step, g, selected),
            heatmaps.mask_state(trace, step, g, selected), heatmaps.confidence(trace, step, g, selected),
            heatmaps.confidence(trace, step, g, selected, field="entropy"),
            reason_map(trace, step, g, selected),
            verifier_map(trace, step, g, selected), router_timeline(trace, step), attention_mask(trace, step),
            trajectories(trace, step, chosen, g), ce_maps(trace, step, g), candidates(trace, step, selected, g))


# clicking a token in the text view selects its position in every view (gr.Plot has no click event; the
# position dropdown is the fallback)
CLICK_JS = ("element.addEventListener('click', (e) => { const t = e.target.closest('[data-pos]'); "
            "if (t) trigger('click', {pos: t.dataset.pos}); });")

TOUR = [
    ("Prompt and blocks", "The answer area starts fully **masked** (grey). It is cut into **blocks** of B positions "
     "on the absolute grid; the dotted lines in the heatmaps are block boundaries. Blocks are decoded left to "
     "right; inside a block, positions are filled in parallel."),
    ("Draft", "Each row of the heatmaps is one **forward**. A *draft* forward proposes a token for every masked "
     "position of the current block; the confidence map shows how sure the model is of each proposal."),
    ("Verify", "S2D2 may then spend one more forward to **verify** the first masked span with the same model in "
     "autoregressive mode (Decode → S2D2 tab: the 2L attention mask). Green squares were accepted, red ones "
     "rejected and resampled."),
    ("Commit", "Tokens that are accepted, or whose confidence clears τ, are **committed** (orange in the mask "
     "map) and never change again. The commit-reason map says which rule took each token."),
    ("Speed and quality", "The cards count forwards (NFE) and tokens per forward (TPF). Move τ, B or the router's "
     "cost c and run again: more tokens per forward is faster, but commits made while unsure can be wrong."),
]


def tour_steps(trace) -> list[int]:
    """1-based slider steps illustrating each tour stop in an S2D2 trace."""
    recs = trace.records
    n = len(recs)
    verify = next((i for i, r in enumerate(recs) if r.kind == "verify"), min(1, n - 1))
    draft = max(0, verify - 1)
    commit = next((i for i, r in enumerate(recs) if r.n_committed > 1), verify)
    return [1, draft + 1, verify + 1, commit + 1, n]


def note(module) -> None:
    """A collapsed "how to read this" under a view, taken from the view module's docstring."""
    with gr.Accordion("How to read this", open=False):
        gr.Markdown(how_to_read(module))


def build_demo(service, examples: list[tuple[str, int]], store=None, example_traces: dict | None = None,
               export_dir: Path | None = None) -> gr.Blocks:
    """service: stream()/check_prompt()/model_id(); store: a TraceStore or None; example_traces: decoder ->
    pre-baked Trace shown on page load; export_dir: where export files are written (None: no export)."""
    answers = {p: a for p, a in examples}
    example_traces = example_traces or {}
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
                with gr.Accordion("TSPD + CE (proposed reconstruction)", open=False) as tspd_box:
                    c["controller"] = gr.Radio(["mlp", "heuristic"], value="mlp", label="Controller")
                    c["ce"] = gr.Checkbox(True, label="Confidence extrapolation (look-ahead)")
                    c["kappa"] = gr.Slider(0.0, 4.0, value=1.64, step=0.01, label="κ (LCB width, in σ)")
                    c["h_max"] = gr.Slider(0, 8, value=4, step=1, label="h_max (longest horizon)")
                    c["tau_s"] = gr.Slider(0.0, 0.99, value=0.0, step=0.01,
                                           label="controller threshold τ_s (0 = calibrated)")
                with gr.Accordion("Sampling", open=False):
                    c["temperature"] = gr.Slider(0.0, 2.0, value=0.0, step=0.05, label="Temperature (0 = greedy)")
                    c["seed"] = gr.Number(value=0, precision=0, label="Seed")
                run = gr.Button("Run", variant="primary", elem_id="run")
            with gr.Column(scale=2):
                summary = gr.HTML(elem_id="summary")
                delta = gr.HTML(elem_id="delta")
                note(summary_view)
                previous = gr.State(None)
                text = gr.HTML(elem_id="text", js_on_load=CLICK_JS)
                note(text_view)
                with gr.Row():
                    step = gr.Slider(1, 2, value=1, step=1, label="Step (scrub a finished run)", elem_id="step",
                                     scale=4)
                    position = gr.Dropdown([], value=None, label="Position", elem_id="position", scale=1,
                                           allow_custom_value=True)
                    # heatmap cells report clicks through this element (gr.Plot has no click event)
                    plot_clicks = gr.HTML("", js_on_load=PLOT_CLICK_JS, elem_id="plot-clicks")
                cand = gr.HTML(elem_id="candidates")
                note(candidates_view)
                with gr.Tabs():
                    with gr.Tab("Decode"):
                        mask_fig = gr.Plot(label="Mask state", elem_id="mask-plot")
                        conf_fig = gr.Plot(label="Confidence", elem_id="conf-plot")
                        ent_fig = gr.Plot(label="Entropy", elem_id="entropy-plot")
                        note(heatmaps)
                        reason_fig = gr.Plot(label="Commit reasons", elem_id="reason-plot")
                        note(reasons_view)
                    with gr.Tab("S2D2"):
                        ver_fig = gr.Plot(label="Verifier map", elem_id="verifier-plot")
                        note(verifier_view)
                        router_fig = gr.Plot(label="Router timeline", elem_id="router-plot")
                        note(router_view)
                        attn_fig = gr.Plot(label="Attention mask of the step", elem_id="attn-plot")
                        note(attention_view)
                    with gr.Tab("TSPD + CE"):
                        gr.Markdown("*PROPOSED: our reconstruction of TSPD + CE; the paper's method section was "
                                    "not available.*")
                        traj_fig = gr.Plot(label="Trajectories and forecast fan", elem_id="traj-plot")
                        note(trajectory_view)
                        ce_fig = gr.Plot(label="Forecast LCB, horizon, class", elem_id="ce-plot")
                        note(ce_view)
                    with gr.Tab("Compare"):
                        compare_tab(service, prompt, answers)
                    with gr.Tab("Sweep"):
                        sweep_point, sweep_open = sweep_tab(service)
                    with gr.Tab("Masks"):
                        masks_tab()
                        note(mask_explorer_view)
                    with gr.Tab("Glossary"):
                        gr.Markdown(GLOSSARY)
                    with gr.Tab("Tour"):
                        gr.Markdown("A guided walk through one decode (an S2D2 example): prompt → block → draft → "
                                    "verify → commit. Each click moves the step slider and explains what you see.")
                        tour_text = gr.Markdown(elem_id="tour-text")
                        tour_btn = gr.Button("Start / next stop", elem_id="tour-next")
                        tour_idx = gr.State(-1)
        with gr.Row():
            prev_btn = gr.Button("◀ prev", size="sm", elem_id="prev")
            play_btn = gr.Button("▶ play / ❚❚ pause", size="sm", elem_id="play")
            next_btn = gr.Button("next ▶", size="sm", elem_id="next")
            link = gr.Textbox(label="Link to this run (query string)", interactive=False, buttons=["copy"],
                              elem_id="link", scale=3)
            export = gr.File(label="Export: JSON · CSV · npz", file_count="multiple", elem_id="export", scale=2)
            svg_btn = gr.Button("Visible figures as SVG", size="sm", elem_id="svg", scale=1)
        timer = gr.Timer(0.5, active=False)
        playing = gr.State(False)
        keys = list(c)
        controls = [c[k] for k in keys]
        views = [summary, text, mask_fig, conf_fig, ent_fig, reason_fig, ver_fig, router_fig, attn_fig, traj_fig,
                 ce_fig, cand]

        def finished(tr, query: str | None, step_v: int | None = None, views_shown: bool = False):
            """The slider, positions, link and export files for a finished trace, and its views at step_v
            (skipped when the stream already showed them at the last step)."""
            n = max(1, len(tr.records))
            s = n if step_v is None else min(max(1, step_v), n)
            shown = (tuple(gr.skip() for _ in views) if views_shown and step_v is None
                     else render_all(tr, s - 1 if step_v is not None else None, answers))
            return (*shown, tr, gr.update(maximum=max(2, n), value=s),
                    gr.update(choices=[int(p) for p in Grid.of(tr).positions], value=None),
                    query if query is not None else gr.skip(),
                    export_files(tr, export_dir) if export_dir else None)

        def from_controls(prompt_v, decoder_v, values):
            """(decoder params, link query) from the page's control values."""
            vals = dict(zip(keys, values))
            return decoder_params(decoder_v, vals), to_query(dict(vals, prompt=prompt_v, decoder=decoder_v))

        def on_run(prompt_v, decoder_v, *values):
            yield from decode(prompt_v, decoder_v, *from_controls(prompt_v, decoder_v, values), None)

        def decode(prompt_v, decoder_v, params, query, step_v):
            """Stream a decode into the views (or take it from the trace cache), then finish the page."""
            key = None
            try:
                if store is not None:
                    key = canonical_key(model=service.model_id(), prompt=service.check_prompt(prompt_v),
                                        decoder=decoder_v, params=params, engine=ENGINE_VERSION)
                    hit = store.get(key)
                    if hit is not None:  # decoded before: explore at once, no model call
                        yield finished(hit, query, step_v)
                        return
                last = None
                for last in service.stream(prompt_v, decoder_v, params):
                    n = max(1, len(last.records))
                    yield (*render_all(last, None, answers), last, gr.update(maximum=max(2, n), value=n),
                           gr.skip(), gr.skip(), gr.skip())
            except ValueError as e:  # UserError and ConfigError: shown to this user, the server goes on
                raise gr.Error(str(e)) from None
            if last is not None:
                if store is not None:
                    store.put(key, last)
                yield finished(last, query, step_v, views_shown=True)

        def on_step(tr, s, pos):
            if tr is None:
                return tuple(gr.skip() for _ in views)
            return render_all(tr, int(s) - 1, answers, int(pos) if pos is not None else None)

        def on_preset(name):
            vals = S2D2_PRESETS.get(name, {})
            return tuple(gr.update(value=vals[k]) if k in vals else gr.skip() for k in keys)

        def move(tr, s, delta):
            if tr is None:
                return gr.skip()
            return int(min(max(1, int(s) + delta), len(tr.records)))

        def toggle(is_playing, tr, s):
            start = not is_playing and tr is not None
            rewind = start and int(s) >= len(tr.records)
            return start, gr.Timer(active=start), (1 if rewind else gr.skip())

        def tick(tr, s, is_playing):
            if tr is None or not is_playing or int(s) >= len(tr.records):
                return gr.skip(), False, gr.Timer(active=False)
            return int(s) + 1, True, gr.skip()

        def on_load(request: gr.Request):
            """Restore controls from the URL; show a pre-baked example at once (before any model call)."""
            values, problems = parse_query(dict(request.query_params) if request else {})
            if problems:
                gr.Warning("Ignored in the link: " + "; ".join(problems))
            updates = [gr.update(value=values["prompt"]) if "prompt" in values else gr.skip(),
                       gr.update(value=values["decoder"]) if "decoder" in values else gr.skip()]
            updates += [gr.update(value=values[k]) if k in values else gr.skip() for k in keys]
            autorun = bool(values)
            example = example_traces.get(values.get("decoder", "threshold")) if not autorun else None
            shown = render_all(example, None, answers) if example is not None else tuple(gr.skip() for _ in views)
            n = len(example.records) if example is not None else 0
            return (*updates, autorun, values.get("step"), *shown, example if example is not None else gr.skip(),
                    gr.update(maximum=max(2, n), value=n) if n else gr.skip())

        def maybe_run(autorun, step_v, prompt_v, decoder_v, *values):
            if not autorun:
                yield tuple(gr.skip() for _ in range(len(views) + 5))
                return
            yield from decode(prompt_v, decoder_v, *from_controls(prompt_v, decoder_v, values),
                              int(step_v) if step_v else None)

        def select_position(evt: gr.EventData):
            pos = getattr(evt, "pos", None)
            return int(pos) if pos is not None else gr.skip()

        def open_point(spec, prompt_v):
            """A sweep setting, decoded on the current prompt into the main views."""
            if not spec:
                raise gr.Error("choose a setting first")
            try:
                name, params = parse_spec(spec)
            except ValueError as e:
                raise gr.Error(str(e)) from None
            yield from decode(prompt_v, name, params, None, None)

        autorun_state, step_from_url = gr.State(False), gr.State(None)
        run_outputs = [*views, trace_state, step, position, link, export]
        decoder.change(lambda d: (DECODERS.get(d, ""), gr.update(open=d == "s2d2"), gr.update(open=d == "tspd")),
                       decoder, [decoder_info, s2d2_box, tspd_box])
        preset.change(on_preset, preset, controls)
        def update_delta(tr, prev):
            """After a run: how it compares with the previous one (kept for comparison), then remember it."""
            if tr is None:
                return gr.skip(), prev
            if prev is None or prev is tr:
                return "", tr
            return previous_delta(tr, prev), tr

        def wire_run(trigger):
            evt = trigger(on_run, [prompt, decoder, *controls], run_outputs, concurrency_id="model",
                          concurrency_limit=1)
            evt.then(None, link, None, js="(q) => { if (q) history.replaceState(null, '', '?' + q); }")
            evt.then(update_delta, [trace_state, previous], [delta, previous], show_progress="hidden")

        svg_btn.click(None, None, None, js=SVG_JS)
        wire_run(run.click)
        for k in keys:  # changing a decoding parameter re-runs on release (cached runs return at once)
            if isinstance(c[k], gr.Slider):
                wire_run(c[k].release)
        def tour_next(i, tr):
            ex = example_traces.get("s2d2")
            if ex is None:
                raise gr.Error("the tour needs the pre-baked S2D2 example (python -m engine.experiments.bake_examples)")
            i = (i + 1) % len(TOUR)
            title, body = TOUR[i]
            s = tour_steps(ex)[i]
            return (i, f"**{i + 1}/{len(TOUR)} · {title}**\n\n{body}", ex,
                    gr.update(maximum=max(2, len(ex.records)), value=s), *render_all(ex, s - 1, answers))

        tour_btn.click(tour_next, [tour_idx, trace_state], [tour_idx, tour_text, trace_state, step, *views],
                       show_progress="hidden")
        text.click(select_position, None, position, show_progress="hidden")
        plot_clicks.click(select_position, None, position, show_progress="hidden")
        sweep_open.click(open_point, [sweep_point, prompt], run_outputs, concurrency_id="model",
                         concurrency_limit=1)
        step.change(on_step, [trace_state, step, position], views, show_progress="hidden")
        position.change(on_step, [trace_state, step, position], views, show_progress="hidden")
        prev_btn.click(lambda tr, s: move(tr, s, -1), [trace_state, step], step, show_progress="hidden")
        next_btn.click(lambda tr, s: move(tr, s, +1), [trace_state, step], step, show_progress="hidden")
        play_btn.click(toggle, [playing, trace_state, step], [playing, timer, step], show_progress="hidden")
        timer.tick(tick, [trace_state, step, playing], [step, playing, timer], show_progress="hidden")
        demo.load(on_load, None, [prompt, decoder, *controls, autorun_state, step_from_url, *views, trace_state,
                                  step]) \
            .then(maybe_run, [autorun_state, step_from_url, prompt, decoder, *controls], run_outputs,
                  concurrency_id="model", concurrency_limit=1)
    return demo


def export_files(trace, directory: Path) -> list[str]:
    """Write the trace as JSON, CSV and npz under a content-addressed name; returns the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    digest = canonical_key(t=trace.meta["final_tokens"], p=trace.meta["params"])[:10]
    stem = directory / f"unmask-{trace.meta['decoder']}-{digest}"
    paths = [stem.with_suffix(".json"), stem.with_suffix(".csv"), stem.with_suffix(".npz")]
    paths[0].write_text(to_json(trace))
    paths[1].write_text(to_csv(trace))
    trace.save(paths[2])
    return [str(p) for p in paths]


# Plotly figures render inside gr.Plot, which has no click event. This element's script binds plotly_click on the
# step x position maps (re-binding as figures are replaced) and reports the clicked column's position, which every
# map's labels start with.
PLOT_CLICK_JS = """
const ids = ['mask-plot', 'conf-plot', 'reason-plot', 'verifier-plot'];
const bind = () => ids.forEach(id => {
  const gd = document.querySelector('#' + id + ' .js-plotly-plot');
  if (!gd || gd.__umBound || !gd.on) return;
  gd.__umBound = true;
  gd.on('plotly_click', ev => {
    const pos = parseInt(String(ev.points[0].x));
    if (!isNaN(pos)) trigger('click', {pos: pos});
  });
});
new MutationObserver(bind).observe(document.body, {childList: true, subtree: true});
bind();
"""


# SVG export runs in the browser with the page's own plotly.js (each plot's toolbar also saves a PNG)
SVG_JS = """
() => document.querySelectorAll('.js-plotly-plot').forEach((gd, i) => {
  if (!gd.offsetParent) return;
  const holder = gd.closest('[id]');
  Plotly.downloadImage(gd, {format: 'svg', filename: 'unmask-' + (holder ? holder.id : 'figure-' + i)});
})
"""


def launch_kwargs() -> dict:
    return dict(css=CSS_PATH.read_text() if CSS_PATH.exists() else None)
