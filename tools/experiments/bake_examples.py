"""Pre-bake one example trace per decoder into assets/examples/ (shown the moment the app opens, and by the tour).

    python -m tools.experiments.bake_examples [--model unmask-tasks-small]

threshold (the page's opening run) decodes the app's first held-out story at T = 1; llada and ar the first
arithmetic problem. The others are chosen to show their mechanism at work:
s2d2 and simsd a sampled story in which the verifier rejects a draft and resamples it (something goes wrong and
is fixed: the tour walks through it), tspd a decode in which the Kalman look-ahead commits a token early, edit a
sampled story whose answer the edits turned from wrong to right (the checker says so), wino and remdm a story in
which a written token goes back to [MASK], eb a story; uniform, on the uniform-noise model, an arithmetic problem whose
noise turns into the right answer; s2d2_picks, S2D2 at τ 0.3 and B 16 on picks, where the verifier rejects
parallel drafts and the answer comes out right; parallel_copy and parallel_shuffle, on unmask-parallel-small, the
same names copied and shuffled by the same threshold rule (``bake_parallel``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from engine.harness.bench import revision_counts
from engine.decoders.cards import cards
from engine.decoders import build_decoder
from engine.runtime.loop import Generation
from engine.models.model import load_model
from engine.tasks import get_task
from engine.records.trace import Reason

OUT = Path(__file__).resolve().parents[2] / "assets" / "examples"
SETTINGS = {
    # the page opens on it: a story at T = 1 whose text changes when τ is dragged to its low end
    "threshold": dict(block_size=8, tau=0.9, temperature=1.0),
    "llada": dict(block_size=8, steps=8),
    "ar": dict(),
    "s2d2": dict(block_size=8, tau=0.9, steps=4, router="always", temperature=1.0),
    "simsd": dict(block_size=8, acceptance="mrs", temperature=1.0),
    # the look-ahead fires rarely on this model (1 of 36 sampled decodes, and only with κ = 0, s_min = 1 and a
    # low-noise filter): the example shows that rare case, and its settings say so
    "tspd": dict(block_size=16, tau=0.9, controller="heuristic", temperature=1.0, kappa=0.0, s_min=1, alpha=0.0,
                 q_level=0.02, q_vel=0.02, r=0.05),
    "edit": dict(block_size=8, temperature=1.0),
    "wino": dict(block_size=8, temperature=1.0),
    "remdm": dict(block_size=8, temperature=1.0),
    "eb": dict(block_size=8, temperature=1.0),
    "uniform": dict(),
}
SETTINGS.update({n: c.example.setting for n, c in cards().items() if c.example})
MODEL_OF = {"uniform": "unmask-uniform-small"}       # decoders shown on another embedded model
# further examples of one decoder in another setting: name -> (decoder, settings, task); the tour shows them
EXTRA = {"s2d2_picks": ("s2d2", dict(block_size=16, tau=0.3, steps=4, router="always", gamma=2.0, temperature=1.0),
                        "picks")}
STORIES = ("s2d2", "simsd", "tspd", "edit", "wino", "remdm", "eb",
           *(n for n, c in cards().items() if c.example and c.example.task == "story"))


def wanted(name: str, trace, adapter=None, prob=None) -> bool:
    """Whether a trace shows what this decoder's example is for."""
    if name == "edit":
        counts = revision_counts(adapter, get_task(prob.task), prob, trace,
                                 get_task(prob.task).verdict(trace.meta.text, prob) == "valid")
        return counts["turned_right"] == 1
    if name in ("wino", "remdm"):
        return any(r.has("revised") for r in trace.records)
    if name in ("s2d2", "simsd"):
        return any(r.kind == "verify" and r.field("rejected_at") is not None for r in trace.records)
    if name == "tspd":
        return any((r.reason == Reason.CE_LOOKAHEAD).any() for r in trace.records)
    if name == "uniform":
        return get_task(prob.task).verdict(trace.meta.text, prob) == "valid"
    return True


def bake(adapter, name: str, params: dict, problems: list, seeds: int = 12, want=None):
    """The first (seed, problem) whose decode shows the mechanism; the first problem if none does."""
    want = want or (lambda tr, prob: wanted(name, tr, adapter, prob))
    for seed in range(seeds):
        for prob in problems:
            tr = Generation(adapter, prob.typed, build_decoder(name, gen_length=64, seed=seed, **params)).run()
            if want(tr, prob):
                return tr
    return Generation(adapter, problems[0].typed, build_decoder(name, gen_length=64, **params)).run()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="unmask-tasks-small")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--only", default="", help="comma-separated decoders to bake (default: all)")
    args = ap.parse_args(argv)
    models = {}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    first = get_task("arith").problems("test", 1, seed=0)
    opener = get_task("story").problems("test", 1, seed=0)
    arith = get_task("arith").problems("test", 10, seed=0)
    stories = get_task("story").problems("test", 10, seed=0)
    only = set(args.only.split(",")) - {""}
    for name, params in SETTINGS.items():
        if only and name not in only:
            continue
        key = MODEL_OF.get(name, args.model)
        if key not in models:
            models[key] = load_model(key)
        problems = stories if name in STORIES else arith if name == "uniform" else opener if name == "threshold" \
            else first
        tr = bake(models[key], name, params, problems)
        tr.save(out / f"{name}.npz")
        print(f"{name}: {tr.meta.prompt!r} -> {tr.meta.text!r} NFE {tr.nfe} seed {tr.meta.seed}")
    for name, (decoder, params, task) in EXTRA.items():
        if only and name not in only:
            continue
        if args.model not in models:
            models[args.model] = load_model(args.model)
        tr = bake(models[args.model], decoder, params, get_task(task).problems("test", 10, seed=0), want=repaired)
        tr.save(out / f"{name}.npz")
        print(f"{name}: {tr.meta.prompt!r} -> {tr.meta.text!r} NFE {tr.nfe} seed {tr.meta.seed}")
    if not only or "branch_edit" in only:
        bake_branch(models.get(args.model) or load_model(args.model), out)
    if not only or "parallel" in only:
        bake_parallel(load_model(PARALLEL_MODEL), out)


def bake_branch(adapter, out: Path) -> None:
    """The tour's what-if (assets/examples/branch_edit.npz): the opening story rewound to its middle step, the
    first masked slot forced to its least likely candidate, and token editing decoding on from there."""
    from engine.runtime.branch import Branch, canvas_after, resume_of
    from engine.records.trace import Trace
    base = Trace.load(out / "threshold.npz")
    m, s = base.meta, len(base.records) // 2
    pos = canvas_after(base, s).index(m.mask_token_id)
    rec = base.records[s]
    tok = int(rec.field("topk_ids")[pos - int(rec.positions[0])][-1])
    params = {k: v for k, v in m.params.items() if k in ("block_size", "gen_length", "temperature", "seed", "tau")}
    spec = "edit:" + ",".join(f"{k}={v}" for k, v in params.items())
    tr = Generation(adapter, m.prompt, build_decoder("edit", **params),
                    resume=resume_of(base, Branch(s, (pos, tok)), spec, adapter.vocab_size)).run()
    tr.save(out / "branch_edit.npz")
    print(f"branch_edit: after step {s}, {base.token_str(tok)!r} at {pos} -> {tr.meta.text!r}")


PARALLEL_MODEL = "unmask-parallel-small"
PARALLEL = dict(block_size=8, tau=0.15, temperature=1.0, gen_length=16)   # one decoder, one τ, for both


def bake_parallel(adapter, out: Path) -> None:
    """The tour's pair (assets/examples/parallel_copy.npz, parallel_shuffle.npz): the same held-out line of names
    copied and shuffled by the same threshold rule at τ 0.15, each block filled in one forward; the first line and
    seed where the copy is right and the shuffle repeats a name."""
    from engine.tasks.common import Problem
    copy, shuffle = get_task("copy"), get_task("shuffle")
    for seed in range(8):
        for prob in copy.problems("test", 20, seed=0):
            line = prob.answer["line"]
            twin = Problem(f"Q : shuffle : {' '.join(line)} . A :", "", dict(prob.answer, op="shuffle"), "shuffle")
            runs = [Generation(adapter, p.typed, build_decoder("threshold", seed=seed, **PARALLEL)).run()
                    for p in (prob, twin)]
            if copy.check(runs[0].meta.text, prob) and shuffle.verdict(runs[1].meta.text, twin) == "wrong":
                for name, tr in zip(("parallel_copy", "parallel_shuffle"), runs):
                    tr.save(out / f"{name}.npz")
                    print(f"{name}: {tr.meta.prompt!r} -> {tr.meta.text!r} NFE {tr.nfe} seed {seed}")
                return
    raise SystemExit("no held-out line shows the collapse at this setting")


def repaired(trace, prob) -> bool:
    """A verify forward rejected a draft and the answer came out right: the verifier repaired a parallel commit."""
    return get_task(prob.task).verdict(trace.meta.text, prob) == "valid" and sum(
        r.kind == "verify" and r.field("rejected_at") is not None for r in trace.records) >= 2


if __name__ == "__main__":
    main()
