"""The README's "Results at a glance": one line per claim, its figures computed from the same records as the tables
of docs/results.md (so a claim and its table cannot disagree), each naming its command and its section there.

A claim's sentence is a function of its record; comparisons are recomputed from per-problem outcomes, and a verdict
("beats", "within noise") is the test's, never typed by hand. A record older than the code it measures says so.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Callable

from engine.harness import stats
from tools.provenance import ROOT
from tools.results.columns import acc, nfe_per_token
from tools.results.render import origin, staleness
from tools.results.tables import PARALLEL_MODEL, bare, RULES, TASKS_MODEL, Table


@dataclass(frozen=True)
class Claim:
    title: str
    command: str
    record: str                       # path under results/
    section: str                      # the heading of its section in docs/results.md
    say: Callable[[dict], str]        # the sentence, from the record
    measures: tuple[str, ...] = ()

    def load(self) -> dict:
        record = json.loads((ROOT / "results" / self.record).read_text())
        return record if isinstance(record, dict) else {"rows": record}


def vs(a: dict, b: dict) -> dict:
    """The exact McNemar test of row ``a`` against row ``b`` on their shared problems and seeds."""
    return stats.compare(a["spec"], [c == "1" for c in a["outcomes"]], b["spec"], [c == "1" for c in b["outcomes"]])


def paired(c: dict) -> str:
    return f"{c['a_only']}–{c['b_only']}, p = {c['p']:.2g}"


def spec_of(rows: list[dict], spec: str) -> dict:
    """The row of ``spec`` (its temperature left out, as the tables line settings up)."""
    found = [r for r in rows if bare(r["spec"]) == spec]
    if not found:
        raise SystemExit(f"a claim reads {spec!r}, which its record does not have")
    return found[0]


def rivals(rec: dict) -> str:
    res = rec["results"]
    tspd = {B: spec_of(res[f"story_B{B}"]["rows"], f"tspd:block_size={B}") for B in (8, 16)}
    beaten, worst = [], 0.0
    for B, t in tspd.items():
        others = [r for r in res[f"story_B{B}"]["rows"] if r["decoder"] != "ar" and r is not t]
        tests = [vs(t, r) for r in others]
        beaten.append(sum(c["significant"] and c["a_only"] > c["b_only"] for c in tests) == len(tests))
        worst = max([worst] + [c["p"] for c in tests])
    prophet = spec_of(res["arith_B16"]["rows"], "prophet:block_size=16,gap_scale=1")
    t16 = spec_of(res["arith_B16"]["rows"], "tspd:block_size=16")
    lost = vs(t16, prophet)["a_only"]
    return (f"on story at T = 1 TSPD + CE is right on {tspd[8]['accuracy']:.3f} (B = 8) and "
            f"{tspd[16]['accuracy']:.3f} (B = 16) at {nfe_per_token(tspd[8]):.3f} / {nfe_per_token(tspd[16]):.3f} "
            f"NFE per token, and {'beats' if all(beaten) else 'does not beat'} every other parallel setting there "
            f"(paired, p ≤ {worst:.2g}); Prophet at the paper's bars loses {lost} of {t16['n']} arithmetic problems "
            "at B = 16")


def round3(rec: dict) -> str:
    picks, s2d2 = rec["ar/picks"], rec["s2d2/new"]
    p, q = picks["paired"], s2d2["paired"]
    return (f"greedy AR on picks {picks['old'][0]:.3f} → {picks['new'][0]:.3f} ({picks['n_prompts'][1]} prompts, "
            f"{p['b_only']}–{p['a_only']}, p = {p['p']:.2g}); S2D2 rejecting {100 * s2d2['reject']:.1f} % of drafts "
            f"{s2d2['s2d2'][0]:.3f} against the same rule unverified {s2d2['threshold'][0]:.3f} "
            f"({q['b_only']}–{q['a_only']}, p = {q['p']:.2g})")


def drafter(rec: dict) -> str:
    base, simsd = rec["rows"]
    c = vs(simsd, base)
    noise = "within noise of" if not c["significant"] else "not within noise of"
    return (f"on stories (B = 4, simplified mask) SimSD is {noise} the target alone ({paired(c)}) at "
            f"{simsd['tpf'] / base['tpf']:.2f}× its static one-per-step TPF, drafter forwards priced at the measured "
            f"time ratio; acceptance {simsd['acceptance_rate']:.3f}")


def parallelbench(rec: dict) -> str:
    shuffle, copy = ({r["spec"]: r for r in rec["results"][t]} for t in ("shuffle", "copy"))
    one, tau9, tau5 = ("llada:block_size=8,steps=1", "threshold:block_size=8,tau=0.9",
                       "threshold:block_size=8,tau=0.5")
    s1, c1 = spec_of(list(shuffle.values()), one), spec_of(list(copy.values()), one)
    s9, c9 = spec_of(list(shuffle.values()), tau9), spec_of(list(copy.values()), tau9)
    ar = spec_of(list(shuffle.values()), "ar")
    return (f"a whole block in one forward keeps copy at {c1['accuracy']:.3f} ({c1['tpf']:.2f} tokens a forward) and "
            f"drops shuffle to {acc(s1)}; the threshold rule at τ 0.9 keeps shuffle at {s9['accuracy']:.3f} "
            f"(against AR at T = 1: {paired(vs(s9, ar))}) at {s9['tpf']:.2f} tokens a forward while copying at "
            f"{c9['tpf']:.2f}; at τ 0.5 shuffle falls to {spec_of(list(shuffle.values()), tau5)['accuracy']:.3f}")


def page(rec: dict) -> str:
    runs = rec["runs"]
    lo, hi = min(r["ratio"] for r in runs), max(r["ratio"] for r in runs)
    return (f"a live run in the page {min(r['page_s'] for r in runs):.2f}–{max(r['page_s'] for r in runs):.2f} s "
            f"against {min(r['api_s'] for r in runs):.2f}–{max(r['api_s'] for r in runs):.2f} s through the API, "
            f"timed in one process ({lo:.1f}–{hi:.1f}× over {len(runs)} settings); longest main-thread task "
            f"{max(r['longest_task_ms'] for r in runs)} ms; ◀ / ▶ redrawn in {rec['scrub']['redraw_median_ms']:.0f} ms "
            f"median over a {rec['scrub']['steps']}-forward trace")


def tune(rec: dict) -> str:
    s = rec["summary"]
    return (f"τ dragged over the opening example: {s['this_ms']:.1f} ms median per input event against "
            f"{s['against_ms']:.1f} ms for the base commit, {s['rounds']} interleaved rounds, faster in "
            f"{s['faster_rounds']} (sign test p = {s['sign_test_p']:.2g}), {s['requests']} requests")


def figures(rec: dict) -> str:
    return (f"{len(rec['desktop'])} and {len(rec['phone'])} of {rec['figures']} figures (every view of "
            f"{rec['examples']} pre-baked examples) with colliding labels at 780 and 350 px")


LOOPS = {"llada": "LLaDA's released `generate.py`", "threshold": "Fast-dLLM's released `generate`"}


def gpu(rec: dict) -> str:
    f, th = rec["forward"][0], rec["threshold_batch1"]
    caches = {c["spec"].split("kv_cache=")[1]: c["vs_none"] for c in rec["caches"] if c["prompt_tokens"] > 100}
    released = " and ".join(f"{r['speedup_per_forward']:.2f}× {LOOPS[r['loop']]}" for r in rec["released"])
    return (f"one {rec['gpu']}, {rec['params'] / 1e9:.1f} B random parameters of LLaDA-8B's shape in bf16: the static "
            f"call {f['static_ms']:.1f} ms against {f['graph_ms']:.1f} ms for the bare model replayed from a graph "
            f"({f['eager_ms']:.1f} ms eager); a `threshold` decode at {th['speedup']:.2f}× the eager path's "
            f"tokens/s ({th['static']['tokens_per_s']:.0f} against {th['eager']['tokens_per_s']:.0f}); per forward "
            f"{released} at equal NFE; Fast-dLLM's prefix and dual caches {caches['prefix']:.2f}× and "
            f"{caches['dual']:.2f}× no cache at a long prompt")


def compiled(rec: dict) -> str:
    v = rec["vs_eager"]["compiled"]
    return (f"`UNMASK_COMPILE=on` decodes at batch 8 at {v['median']:.2f}× (range {v['low']:.2f}–{v['high']:.2f}) "
            f"today's ragged eager path on this CPU in fp32, the same outcomes in every run")


def batching(rec: dict) -> str:
    rows = rec["rows"] if "rows" in rec else rec["bench"]
    return ("the engine loop's batched rounds on this CPU: " +
            ", ".join(f"batch {r['batch']} {r['vs_batch_1']:.2f}×" for r in rows if r["batch"] > 1) +
            " batch 1's tokens/s" + ("" if all(r["same_rows"] for r in rows) else " (rows differ from batch 1's)"))


CLAIMS = [
    Claim("TSPD + CE against Prophet, KLASS and credit decoding", "python -m tools.experiments rivals --model "
          "unmask-tasks-small --n 300", "rivals_unmask-tasks-small.json",
          "TSPD + CE against its trajectory-aware rivals: Prophet, KLASS, credit decoding", rivals, (*RULES, TASKS_MODEL)),
    Claim("The embedded tasks model", "python -m engine bench --model unmask-tasks-small --task picks --n 300 --decoder ar",
          "tasks_model_round3.json", "The embedded tasks model (round three)", round3),
    Claim("SimSD with the round-four drafter", "python -m engine bench --model unmask-tasks-small --task story "
          "--n 200 …", "drafter_story_simplified.json", "SimSD with the round-four drafter", drafter,
          ("engine/decoders/simsd", TASKS_MODEL, "assets/models/unmask-tasks-drafter")),
    Claim("Where parallel decoding must fail", "python -m tools.experiments parallelbench --model "
          "unmask-parallel-small --n 300", "parallelbench_unmask-parallel-small.json",
          "Where parallel decoding must fail: ParallelBench's tasks", parallelbench, (*RULES, PARALLEL_MODEL)),
    Claim("Batched decoding", "python -m tools.experiments batching --model unmask-tasks-small --n 200",
          "batching.json", "A class behind one address, and batched decoding", batching, ("engine/runtime",)),
    Claim("The page", "python -m tools.page.bench_page", "bench_page.json", "The page", page,
          ("explorer", "assets/js", "app.py")),
    Claim("Tuning by eye", "python -m tools.page.bench_tune --against BASE", "bench_tune.json", "The page", tune,
          ("assets/js",)),
    Claim("Figures that fit", "python -m tools.page.bench_figures", "bench_figures.json", "The page", figures,
          ("explorer/views", "explorer/render.py")),
    Claim("The engine at the GPU's speed", "python -m tools.gpu --out DIR --static all --refs DIR",
          "gpu/static_h200.json", "The engine at the GPU's speed: static buffers and CUDA graphs", gpu,
          ("engine/models/static.py", "engine/models/compiled.py", "engine/runtime/runner.py")),
    Claim("A compiled forward", "python -m tools.experiments.compiled bench --batch 8 --n 24 --repeats 3",
          "compiled/bench8_cpu.json", "A compiled forward", compiled,
          ("engine/models/compiled.py", "engine/models/static.py")),
]


def anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, each space a hyphen."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def line(claim: Claim, headings: set[str]) -> str:
    if claim.section not in headings:
        raise SystemExit(f"claim {claim.title!r} names section {claim.section!r}, which docs/results.md lacks")
    record = claim.load()
    commit, _ = origin(Table(claim.title, claim.record, "rows", ()), record)
    stale = " older than the code it measures" if staleness(commit, claim.measures) else ""
    return (f"- **{claim.title}** (`{claim.command}`): {claim.say(record)}. [Table](docs/results.md#{anchor(claim.section)}); "
            f"record `results/{claim.record}`{stale}.")


def draw(results_md: str) -> str:
    """The list, given docs/results.md's text (each claim links its section there)."""
    headings = set(re.findall(r"^## (.+)$", results_md, re.M))
    return "\n".join(line(c, headings) for c in CLAIMS)
