"""Every table the docs show, as data: which record it reads, its rows, its columns and the code it measures.

``measures`` names the code whose later change makes the record stale (the caption then says so): the decoders a
table compares, the model it ran, and the engine parts its figures depend on.
"""

from __future__ import annotations

from tools.results.columns import (ACC, GROUP, NFE, NFE_PAPER, NFE_TOKEN, SETTING, TOKS, TPF, VERDICTS, VS, acc,
                                   each, nfe_per_token, paired)
from typing import Callable

from tools.results.render import Column, Table, dig

TASKS_MODEL = "assets/models/unmask-tasks-small"
ARITH_MODEL = "assets/models/unmask-arith-tiny"
PARALLEL_MODEL = "assets/models/unmask-parallel-small"
RULES = ("engine/decoders", "engine/runtime/loop.py", "engine/runtime/runner.py")


def tspd_default(rows: list[dict]) -> int:
    return next(i for i, r in enumerate(rows) if r["decoder"] == "tspd" and "controller" not in r["spec"])


def bare(spec: str) -> str:
    """A spec without its temperature, so the same setting lines up across greedy and sampled tasks."""
    return spec.replace(",temperature=1", "").replace(":temperature=1", "")


def side_by_side(groups: dict[str, list[dict]], fields: dict[str, str]) -> list[dict]:
    """One row per setting (``bare`` spec), each group's ``fields`` as its own columns ``group field``."""
    rows: dict[str, dict] = {}
    for label, group in groups.items():
        for r in group:
            row = rows.setdefault(bare(r["spec"]), {"spec": bare(r["spec"])})
            row.update({f"{label} {name}": value(r) if callable(value) else r.get(value)
                        for name, value in fields.items()})
    return list(rows.values())


def task_columns(tasks, fields: dict[str, str], fmts: dict[str, str]) -> tuple[Column, ...]:
    return tuple(Column(f"{t} {name}", f"{t} {name}", fmts.get(name, "")) for t in tasks for name in fields)


RIVAL_FIELDS = {"acc": acc, "NFE/token": nfe_per_token, "vs TSPD": "vs"}


def rivals(B: int) -> Table:
    tasks = ("arith", "story", "picks")

    def rows(rec):
        return side_by_side({t: paired(rec["results"][f"{t}_B{B}"]["rows"],
                                       tspd_default(rec["results"][f"{t}_B{B}"]["rows"])) for t in tasks},
                            RIVAL_FIELDS)
    return Table(f"rivals-{B}", "rivals_unmask-tasks-small.json", rows,
                 (SETTING, *task_columns(tasks, RIVAL_FIELDS, {"NFE/token": ".3f"})),
                 measures=(*RULES, TASKS_MODEL),
                 note=f"B = {B}; arith at T = 0, story and picks at T = 1 (the setting's `temperature=1` left out "
                      "above); 300 problems per task, 300 distinct prompts; *vs TSPD*: row only – TSPD only.")


def uncertain(rec: dict) -> list[dict]:
    tasks = ("arith", "story", "picks")
    return side_by_side({t: paired(rec["results"][t], 7) for t in tasks}, UNCERTAIN_FIELDS)


UNCERTAIN_FIELDS = {"acc": acc, "vs threshold": "vs", "TPF": "tpf"}


def klass_release(rec: dict) -> list[dict]:
    out = []
    for group, g in rec["results"].items():
        rows = paired(g["rows"], tspd_default(g["rows"]))
        out += [dict(r, group=group.replace("_B", ", B = ")) for r in rows if r["decoder"] == "klass"]
    return out


def round3(rec: dict) -> list[dict]:
    out = []
    for task in ("arith", "story", "picks"):
        r = rec[f"ar/{task}"]
        p = r["paired"]
        out.append(dict(task=task, old=acc(dict(accuracy=r["old"][0], accuracy_ci95=r["old"][1])),
                        new=acc(dict(accuracy=r["new"][0], accuracy_ci95=r["new"][1])), n=r["n_prompts"][1],
                        vs=f"{p['b_only']}–{p['a_only']}, p = {p['p']:.2g}" +
                        ("" if p["significant"] else " (within noise)")))
    return out


def pareto_rows(rec: dict) -> list[dict]:
    """The references and each family's Pareto front, the front's points in bold."""
    front = {spec for specs in rec["fronts"].values() for spec in specs}
    refs = [r for r in rec["rows"] if r["decoder"] in ("ar", "llada")]
    return refs + [dict(r, bold=True) for r in rec["rows"] if r["spec"] in front]


def page_runs(rec: dict) -> list[dict]:
    return [dict(r, spec_md=f"`{r['spec']}`") for r in rec["runs"]]


def forward_rows(rec: dict) -> list[dict]:
    return rec["forward"]


def facts(*pairs) -> Callable[[dict], list[dict]]:
    """Rows of (what, value) for a record of single figures: each value a function of the record."""
    return lambda rec: [dict(what=what, value=value(rec)) for what, value in pairs]


def ux_facts(rec: dict) -> list[dict]:
    return facts(
        ("controls shown at 1500×1100 (threshold / S2D2 / canvas)",
         lambda r: " / ".join(str(len(r[k])) for k in ("controls", "controls_s2d2", "controls_uniform"))),
        ("prompt, decoder, Run and text in the first view", lambda r: all(r["first_view"].values())),
        ("tour stops with their view and card on screen",
         lambda r: f"{sum(t['view_in_sight'] and t['card_in_sight'] for t in r['tour'])} of {len(r['tour'])}"),
        ("τ drag: ms per input event, median / max", lambda r: f"{r['tune']['median_ms']:.0f} / "
                                                             f"{r['tune']['max_ms']:.0f}"),
        ("τ drag: cells marked at τ 0.10, requests sent", lambda r: f"{r['tune']['marks']}, "
                                                                    f"{r['tune']['requests']}"),
        ("phone (390×844): Run in the first view", lambda r: r["phone"]["run_in_sight"]))(rec)


FACT = (Column("measure", "what"), Column("value", "value"))


def gpu_decodes(rec: dict) -> list[dict]:
    """Batch-1 decodes static against eager, the caches and the released loops, one row each."""
    rows = [dict(what=f"`{d['spec']}`, static vs eager", static=d["static"]["ms_per_forward"],
                 other=d["eager"]["ms_per_forward"], ratio=d["speedup"], toks=d["static"]["tokens_per_s"])
            for d in (rec["threshold_batch1"], rec["llada_batch1"])]
    rows += [dict(what=f"`{c['spec'].split(',kv_cache=')[1]}` cache, {c['prompt']} prompt",
                  static=c["ms_per_forward"], ratio=c["vs_none"], toks=c["tokens_per_s"]) for c in rec["caches"]]
    rows += [dict(what=f"{r['loop']} vs its released loop at equal NFE (per forward)",
                  static=r["unmask_ms_per_forward"], other=r["released_ms_per_forward"],
                  ratio=r["speedup_per_forward"], toks=r["unmask_tokens_per_s"]) for r in rec["released"]]
    return rows


BENCH = (SETTING, ACC, VS, NFE, NFE_PAPER, TPF, TOKS)
TABLES = [
    rivals(8), rivals(16),
    Table("klass-release", "rivals_klass_release_unmask-tasks-small.json", klass_release,
          (GROUP, SETTING, ACC, NFE_TOKEN, Column("paired vs TSPD (row only – TSPD only)", "vs")),
          measures=("engine/decoders/klass", TASKS_MODEL),
          note="T = 1; 300 problems, 300 distinct prompts, a seed per problem shared by every row."),
    Table("remdm-release", "revising_remdm_release_unmask-tasks-small.json",
          lambda rec: each(rec, {"story": "results.story", "picks": "results.picks"}, base=0),
          (GROUP, SETTING, ACC, VS, NFE, Column("revisions / sample", "edits_per_sample", ".2f")),
          measures=("engine/decoders/remdm", TASKS_MODEL),
          note="B = 8, T = 1; 200 problems, 200 distinct prompts; base: the threshold rule at τ 0.9."),
    Table("remdm-issue68", "revising_remdm_issue68_unmask-tasks-small.json",
          lambda rec: each(rec, {"story": "results.story", "picks": "results.picks"}),
          (GROUP, SETTING, ACC, NFE, Column("revisions / sample", "edits_per_sample", ".2f")),
          measures=("engine/decoders/remdm", TASKS_MODEL), note="200 problems, 200 distinct prompts."),
    Table("tasks-model-round3", "tasks_model_round3.json", round3,
          (Column("task", "task"), Column("greedy AR, round-two weights", "old"),
           Column("round-three weights", "new"), Column("distinct prompts", "n"),
           Column("paired (new only – old only)", "vs")),
          note="300 held-out problems per task."),
    Table("uncertain", "uncertain_arith_story_picks.json", uncertain,
          (SETTING, *task_columns(("arith", "story", "picks"), UNCERTAIN_FIELDS, {"TPF": ".2f"})),
          measures=(*RULES, TASKS_MODEL),
          note="B = 8; 300 problems per task, 300 distinct prompts; *vs threshold*: paired with the threshold rule "
               "at τ 0.9, T = 1 (row only – threshold only); the record has each row's verdicts, NFE and reject "
               "rate."),
    Table("drafter-simplified", "drafter_story_simplified.json", lambda rec: paired(rec["rows"], 0),
          (SETTING, ACC, VS, NFE, TPF, Column("acceptance", lambda r: (r.get("accepted_tokens") or None) and
                                              dig(r, "acceptance_rate"), ".3f")),
          measures=("engine/decoders/simsd", TASKS_MODEL, "assets/models/unmask-tasks-drafter"),
          note="story, B = 4, greedy; 200 problems, 200 distinct prompts."),
    Table("simsd", "simsd_story_picks.json",
          lambda rec: each(rec, {k.replace("_B", ", B = "): f"results.{k}" for k in
                                 ("story_B8", "picks_B8")}, base=0),
          (GROUP, SETTING, ACC, VS, NFE_TOKEN, TPF, Column("acceptance", "acceptance_rate", ".3f")),
          measures=("engine/decoders/simsd", TASKS_MODEL, "assets/models/unmask-tasks-drafter"),
          note="B = 8 (the record has B = 4 too); 100 problems per task, 100 distinct prompts (fewer than a claim "
               "needs: read as what they show)."),
    Table("simsd-arith", "simsd_arith.json",
          lambda rec: each(rec, {"arith, B = 4": "results.arith_B4", "arith, B = 8": "results.arith_B8"}, base=0),
          (GROUP, SETTING, ACC, VS, NFE_TOKEN, Column("acceptance", "acceptance_rate", ".3f")),
          measures=("engine/decoders/simsd", TASKS_MODEL, "assets/models/unmask-tasks-drafter"),
          note="200 problems, 200 distinct prompts."),
    Table("baselines", "baselines.json", lambda rec: paired(rec["results"]["rows"], 0), BENCH,
          measures=(*RULES, ARITH_MODEL), note="500 held-out problems, 500 distinct prompts; base: AR."),
    Table("s2d2", "s2d2.json",
          lambda rec: each(rec, {f"B = {b}": f"results.{b}.rows" for b in ("4", "8", "16")}, base=1),
          (GROUP, SETTING, ACC, VS, NFE, TPF, Column("verify rate", "verify_rate", ".2f"), TOKS),
          measures=("engine/decoders/s2d2", ARITH_MODEL),
          note="200 test problems per B; base: the threshold rule (SDAR's dynamic rule, τ tuned on 100 val)."),
    Table("s2d2-dynamic", "s2d2_dynamic.json", lambda rec: paired(rec["rows"], 1), BENCH,
          measures=("engine/decoders/s2d2", ARITH_MODEL),
          note="200 problems, 200 distinct prompts; base: the threshold rule at τ 0.9, B = 16."),
    Table("tspd-pareto-tasks", "tspd_pareto_unmask-tasks-small.json", pareto_rows,
          (SETTING, ACC, NFE_TOKEN, TPF), measures=("engine/decoders/tspd", TASKS_MODEL),
          note="mix, B = 16, 500 problems (500 distinct prompts), greedy."),
    Table("uniform", "uniform_tasks.json", "rows",
          (Column("task", "task"), Column("weights", "model"), ACC, NFE, NFE_PAPER, VERDICTS),
          measures=("engine/decoders/uniform", "assets/models/unmask-uniform-small"),
          note="200 problems per task, 200 distinct prompts each."),
    Table("kv-cache", "kv_cache.json", "rows",
          (Column("generation length", "gen_length"), Column("kv_cache", "kv_cache"), Column("NFE", "nfe"),
           Column("ms / token", "ms_per_token", ".1f"), Column("× none", "vs_none", ".2f"),
           Column("tokens equal to none's", "tokens_equal_none", ".2f")),
          measures=("engine/runtime/cache.py", "engine/models", "engine/decoders/llada"),
          note="85 M random parameters in LLaDA's layout, fp32, one thread; each setting once after a warm-up."),
    Table("parallelbench", "parallelbench_unmask-parallel-small.json", "summary",
          (SETTING, Column("shuffle", "shuffle_acc"), Column("shuffle vs AR", "shuffle_vs_ar"),
           Column("shuffle TPF", "shuffle_tpf", ".2f"), Column("copy", "copy_acc"),
           Column("copy TPF", "copy_tpf", ".2f")),
          measures=(*RULES, PARALLEL_MODEL, "engine/tasks/parallelbench.py"),
          note="T = 1, B = 8; 300 problems per task, 300 distinct prompts each."),
    Table("batching", "batching.json", "bench",
          (Column("batch", "batch"), ACC, Column("tokens/s", "tokens_per_s", ".0f"),
           Column("× batch 1", "vs_batch_1", ".2f"), Column("rows equal", "same_rows")),
          measures=("engine/runtime", "engine/models"),
          note="mix, `threshold:tau=0.9,block_size=8`, 200 problems (200 distinct prompts), one torch thread."),
    Table("bench-page", "bench_page.json", page_runs,
          (Column("setting", "spec_md"), Column("API s", "api_s", ".2f"), Column("page s", "page_s", ".2f"),
           Column("page / API", "ratio", ".2f"), Column("longest main-thread task ms", "longest_task_ms")),
          measures=("explorer", "assets/js", "app.py"), note="Chromium and the app on this 2-core machine."),
    Table("bench-page-scrub", "bench_page.json", facts(
        ("trace scrubbed", lambda r: f"`{r['scrub']['spec']}`, {r['scrub']['steps']} forwards"),
        ("◀ / ▶ redraw ms, median / max", lambda r: f"{r['scrub']['redraw_median_ms']:.0f} / "
                                                   f"{r['scrub']['redraw_max_ms']:.0f}"),
        ("play, steps per second", lambda r: f"{r['scrub']['play_steps_per_s']:.1f}"),
        ("overflowing text elements", lambda r: r["scrub"]["overflowing_elements"])),
          FACT, measures=("explorer", "assets/js"), note="Chromium on this 2-core machine."),
    Table("compiled-bench8", "compiled/bench8_cpu.json", lambda rec: [
        dict(what=m, toks=rec["tokens_per_s"][m], **rec["vs_eager"][m]) for m in ("eager", "static", "compiled")],
          (Column("path", "what"), Column("tokens/s", "toks", ".1f"), Column("× today's (median)", "median", ".2f"),
           Column("lowest", "low", ".2f"), Column("highest", "high", ".2f")),
          measures=("engine/models/compiled.py", "engine/models/static.py"),
          note="`threshold:tau=0.9,block_size=8`, 24 problems of the mix, batch 8, the three paths alternating "
               "three times in one process; the same outcomes in every run."),
    Table("bench-ux", "bench_ux.json", ux_facts, FACT, measures=("explorer", "assets/js", "assets/css"),
          note="Chromium on this 2-core machine."),
    Table("bench-tune", "bench_tune.json", facts(
        ("rounds (interleaved, 11 input events each)", lambda r: r["summary"]["rounds"]),
        ("ms per input event, median: this commit / the base", lambda r: f"{r['summary']['this_ms']:.1f} / "
                                                                        f"{r['summary']['against_ms']:.1f}"),
        ("ratio", lambda r: f"{r['summary']['ratio']:.2f}×"),
        ("rounds faster / slower", lambda r: f"{r['summary']['faster_rounds']} / {r['summary']['slower_rounds']}"),
        ("sign test p", lambda r: f"{r['summary']['sign_test_p']:.2g}"),
        ("cells marked (this / base), requests", lambda r: f"{r['summary']['marks'][0]} / "
                                                           f"{r['summary']['marks'][1]}, {r['summary']['requests']}")),
          FACT, measures=("assets/js",), note="Both apps up in one process; the base commit's drag marks fewer cells."),
    Table("bench-figures", "bench_figures.json", facts(
        ("figures checked (every view of every pre-baked example, first, middle and last step)",
         lambda r: f"{r['figures']} from {r['examples']} examples"),
        ("colliding at 780 px (desktop) / 350 px (phone)", lambda r: f"{len(r['desktop'])} / {len(r['phone'])}")),
          FACT, measures=("explorer/views", "explorer/render.py"), note="Plotly.js in Chromium."),
    Table("gpu-static-decodes", "gpu/static_h200.json", gpu_decodes,
          (Column("decode", "what"), Column("static ms / forward", "static", ".2f"),
           Column("other ms / forward", "other", ".2f"), Column("× (tokens/s ratio)", "ratio", ".2f"),
           Column("static tokens/s", "toks", ".0f")),
          measures=("engine/models/static.py", "engine/models/compiled.py", "engine/runtime/runner.py"),
          note="Caches: `llada:block_size=32,steps=64,gen_length=256`, ratio against no cache."),
    Table("gpu-static-forward", "gpu/static_h200.json", forward_rows,
          (Column("batch", "batch"), Column("rows", "rows"), Column("eager ms", "eager_ms", ".2f"),
           Column("static ms", "static_ms", ".2f"), Column("graph replay ms", "graph_ms", ".2f"),
           Column("kernels ms", "kernel_ms", ".2f")),
          measures=("engine/models/static.py", "engine/models/compiled.py", "engine/runtime/runner.py"),
          note="one H200, 8.0 B random parameters of LLaDA-8B's shape, bf16."),
]
